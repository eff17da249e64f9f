// The web UI: `GET /` is webRoot/index.html (or, before the UI is built, a small page pointing
// to the API), other GET paths are files under webRoot, never outside it; paths without a file
// extension fall back to index.html so the UI's own routes survive a reload.

import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { ApiContext } from "./context.ts";
import { ApiError } from "./errors.ts";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".ico": "image/x-icon",
  ".webp": "image/webp",
  ".woff2": "font/woff2",
  ".woff": "font/woff",
  ".txt": "text/plain; charset=utf-8",
};

const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Tether</title></head>
<body>
<h1>Tether</h1>
<p>The web UI is not built yet. The server is running: use the HTTP API under
<code>/api/v1</code> (start with <a href="/api/v1/health">/api/v1/health</a>), or the CLI:
<code>bin/tether chat "hello"</code>.</p>
</body>
</html>
`;

async function isFile(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isFile();
  } catch {
    return false;
  }
}

async function sendFile(reply: FastifyReply, file: string): Promise<FastifyReply> {
  const type = CONTENT_TYPES[path.extname(file).toLowerCase()] ?? "application/octet-stream";
  return reply.type(type).send(await readFile(file));
}

/** The file under `root` that `urlPath` names, or undefined when it would leave the root. */
function resolveInside(root: string, urlPath: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (decoded.includes("\0")) return undefined;
  const file = path.resolve(root, "." + path.posix.normalize("/" + decoded));
  const rel = path.relative(root, file);
  return rel === "" || rel.startsWith("..") || path.isAbsolute(rel) ? undefined : file;
}

export function webRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const root = ctx.webRoot === undefined ? undefined : path.resolve(ctx.webRoot);
  const index = root === undefined ? undefined : path.join(root, "index.html");

  const sendIndex = async (reply: FastifyReply): Promise<FastifyReply> =>
    index !== undefined && (await isFile(index))
      ? sendFile(reply, index)
      : reply.type("text/html; charset=utf-8").send(NOT_BUILT_PAGE);

  app.get("/", async (_request, reply) => sendIndex(reply));

  app.get("/*", async (request, reply) => {
    const urlPath = request.url.split("?")[0]!;
    const notFound = new ApiError(404, `Nothing at ${urlPath}.`);
    if (urlPath === "/api" || urlPath.startsWith("/api/") || root === undefined) throw notFound;
    const file = resolveInside(root, urlPath);
    if (file !== undefined && (await isFile(file))) return sendFile(reply, file);
    if (path.posix.extname(urlPath) === "") return sendIndex(reply);
    throw notFound;
  });
}
