// Raw HTTP for tests: repeated headers stay repeated, bodies stay bytes, nothing is retried.

import http from "node:http";

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Every value of every header, repeats kept apart. */
  rawHeaders: string[];
  body: Buffer;
  text: string;
  json: <T = Record<string, unknown>>() => T;
}

export interface RawRequest {
  method?: string;
  path: string;
  headers?: Record<string, string | string[]>;
  body?: Buffer | string | object;
  signal?: AbortSignal;
}

export function rawRequest(baseUrl: string, r: RawRequest): Promise<RawResponse> {
  const url = new URL(r.path, baseUrl);
  const body =
    r.body === undefined
      ? undefined
      : Buffer.isBuffer(r.body)
        ? r.body
        : typeof r.body === "string"
          ? Buffer.from(r.body)
          : Buffer.from(JSON.stringify(r.body));
  const headers: Record<string, string | string[]> = { ...r.headers };
  if (body && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
    headers["content-type"] = "application/json";
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: r.method ?? (body ? "POST" : "GET"),
        headers,
        agent: false,
        ...(r.signal && { signal: r.signal }),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const b = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: b,
            text: b.toString("utf8"),
            json: <T>() => JSON.parse(b.toString("utf8")) as T,
          });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Values of one response header, repeats kept apart. */
export function headerValues(res: RawResponse, name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    if (res.rawHeaders[i]!.toLowerCase() === name.toLowerCase()) out.push(res.rawHeaders[i + 1]!);
  }
  return out;
}

/**
 * What `clients` requests at once with a request line of `bytes` (far over the 16 KiB head
 * limit, and more than the socket buffers hold, so the server answers while they are still
 * being written) each got: `STATUS code`, or the error's code when no answer could be read.
 */
export async function oversizedHeadOutcomes(
  baseUrl: string,
  o: { clients: number; bytes: number },
): Promise<string[]> {
  const path = `/api/v1/x?q=${"x".repeat(o.bytes)}`;
  return Promise.all(
    Array.from({ length: o.clients }, async () => {
      try {
        const r = await rawRequest(baseUrl, { path });
        return `${r.status} ${String(r.json().code)}`;
      } catch (err) {
        return String((err as NodeJS.ErrnoException).code);
      }
    }),
  );
}
