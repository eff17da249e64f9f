import { describe, expect, it } from "vitest";
import { createLogger, REDACTED } from "./log.ts";

function capture() {
  const lines: string[] = [];
  const log = createLogger({ destination: { write: (s: string) => void lines.push(s) } });
  return { log, lines, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("server log", () => {
  it("agent tokens, model API keys, passwords and Authorization headers are censored wherever they sit", () => {
    const { log, lines } = capture();
    const secrets = [
      "tok-top",
      "agent-tok-row",
      "sk-model-key",
      "sk-camel-key",
      "Bearer hdr-secret",
      "x-key-secret",
      "pw-secret",
      "sk-in-error",
    ];
    log.info({ token: "tok-top" }, "top level");
    log.info({ workspace: { agent_url: "http://a", agent_token: "agent-tok-row" } }, "a row");
    log.info({ model: { provider: "openai", api_key: "sk-model-key" } }, "a model config");
    log.info({ options: { apiKey: "sk-camel-key" } }, "provider options");
    log.info(
      { req: { headers: { authorization: "Bearer hdr-secret", "x-api-key": "x-key-secret" } } },
      "a request",
    );
    log.info({ user: { email: "a@b.c", password: "pw-secret" } }, "a user");
    const err = Object.assign(new Error("The provider refused the request."), {
      requestHeaders: { Authorization: "sk-in-error" },
    });
    log.warn({ err }, "model error");
    const text = lines.join("");
    for (const s of secrets) expect(text).not.toContain(s);
    expect(text.split(REDACTED).length - 1).toBe(secrets.length);
    // What is not a secret stays readable.
    expect(text).toContain("http://a");
    expect(text).toContain("a@b.c");
    expect(text).toContain("The provider refused the request.");
  });

  it("the replica secret, session cookies, secret keys and database URLs are censored too", () => {
    const { log, lines } = capture();
    log.info({ replica: { secret: "replica-secret-1" } }, "relay");
    log.info(
      {
        req: {
          headers: {
            cookie: "tether_session=cookie-secret-2",
            "x-tether-replica-secret": "replica-secret-3",
          },
        },
        res: { headers: { "set-cookie": "tether_session=cookie-secret-4" } },
      },
      "a request",
    );
    log.info({ options: { postgresUrl: "postgres://u:pw-5@db/x", secretKey: "key-6" } }, "opts");
    log.info({ connectionString: "postgres://u:pw-7@db/x" }, "pg");
    const text = lines.join("");
    for (const s of ["secret-1", "secret-2", "secret-3", "secret-4", "pw-5", "key-6", "pw-7"])
      expect(text).not.toContain(s);
  });

  it("writes JSON lines at info by default; debug is left out", () => {
    const { log, parsed } = capture();
    log.debug("not shown");
    log.info({ chat_id: "c" }, "shown");
    expect(parsed()).toEqual([expect.objectContaining({ level: 30, msg: "shown", chat_id: "c" })]);
  });
});
