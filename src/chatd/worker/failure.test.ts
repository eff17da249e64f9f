import { APICallError } from "ai";
import { describe, expect, it } from "vitest";
import { AgentConnectionError } from "../../contract/index.ts";
import { LoadAPIKeyError, LoadSettingError } from "ai";
import { failureSentence, failureSummary, isPermanent, retryAfterMs } from "./failure.ts";

function apiError(o: {
  statusCode?: number;
  headers?: Record<string, string>;
  cause?: unknown;
  message?: string;
  isRetryable?: boolean;
}): APICallError {
  return new APICallError({
    message: o.message ?? "Cannot connect to API: connect ECONNREFUSED 127.0.0.1:9",
    url: "http://user:pw@127.0.0.1:9/v1/chat/completions?key=secret",
    requestBodyValues: { messages: [{ role: "user", content: "THE PROMPT" }] },
    ...(o.statusCode !== undefined && { statusCode: o.statusCode }),
    ...(o.headers && { responseHeaders: o.headers }),
    ...(o.cause !== undefined && { cause: o.cause }),
    ...(o.isRetryable !== undefined && { isRetryable: o.isRetryable }),
  });
}

const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), {
  code: "ECONNREFUSED",
});

describe("failure sentences and summaries", () => {
  it("a model that cannot be connected to is named by its base URL, without credentials or query", () => {
    const err = apiError({ cause: refused });
    expect(failureSentence(err)).toBe(
      "Cannot connect to the model: connection refused (http://127.0.0.1:9/v1).",
    );
  });

  it("a log summary holds the class, code, status and message, never the request", () => {
    const s = failureSummary(apiError({ cause: refused, statusCode: 503 }));
    expect(s).toEqual({
      type: "AI_APICallError",
      code: "ECONNREFUSED",
      status: 503,
      message: "Cannot connect to API: connect ECONNREFUSED 127.0.0.1:9",
    });
    expect(JSON.stringify(s)).not.toContain("THE PROMPT");
    expect(failureSummary(new Error("x".repeat(10_000))).message.length).toBeLessThanOrEqual(300);
  });

  it("an auth refusal says to check the key and never quotes the provider's message", () => {
    const err = apiError({ statusCode: 401, message: "Incorrect API key provided: sk-abc" });
    expect(failureSentence(err)).toBe(
      "The model provider refused the API key (HTTP 401, http://127.0.0.1:9/v1): check the model's key.",
    );
    expect(isPermanent(err)).toBe(true);
  });

  it("a redirect elsewhere names where to, without its query, and is permanent", () => {
    const err = apiError({
      statusCode: 308,
      message: "Permanent Redirect",
      headers: { Location: "https://api.example.com/v2/chat/completions?token=secret" },
    });
    expect(failureSentence(err)).toBe(
      "The model provider redirected the request elsewhere (HTTP 308, http://127.0.0.1:9/v1 to https://api.example.com/v2): the model's key goes only to its base URL, so set the base URL to the new address.",
    );
    expect(isPermanent(err)).toBe(true);
  });

  it("a model without an API key is permanent: it ends the turn, not 10 minutes of retries", () => {
    const err = new LoadAPIKeyError({ message: "Anthropic API key is missing." });
    expect(isPermanent(err)).toBe(true);
  });

  it("a model missing a provider setting (Bedrock without a region) is permanent too", () => {
    const err = new LoadSettingError({ message: "AWS region setting is missing." });
    expect(isPermanent(err)).toBe(true);
  });

  it("a retryable model error and an agent connection error are not permanent", () => {
    expect(isPermanent(apiError({ statusCode: 503 }))).toBe(false);
    expect(isPermanent(new AgentConnectionError("down", "connect"))).toBe(false);
  });
});

describe("Retry-After", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  it("retry-after-ms wins, then retry-after in seconds, then as an HTTP date", () => {
    const h = (headers: Record<string, string>) => apiError({ statusCode: 429, headers });
    expect(retryAfterMs(h({ "retry-after-ms": "1500.5", "retry-after": "9" }), now)).toBe(1501);
    expect(retryAfterMs(h({ "Retry-After": "3" }), now)).toBe(3000);
    expect(retryAfterMs(h({ "retry-after": "Thu, 01 Jan 2026 00:00:07 GMT" }), now)).toBe(7000);
    expect(retryAfterMs(h({ "retry-after": "soon" }), now)).toBeUndefined();
    expect(retryAfterMs(h({}), now)).toBeUndefined();
    expect(retryAfterMs(new Error("x"), now)).toBeUndefined();
  });

  it("a longer ask is capped", () => {
    const err = apiError({ statusCode: 429, headers: { "retry-after": "3600" } });
    expect(retryAfterMs(err, now)).toBe(60_000);
    expect(retryAfterMs(err, now, 5_000)).toBe(5_000);
  });
});
