import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../chatd/db/index.ts";
import { StreamBuffer } from "../chatd/stream.ts";
import { createApi } from "./app.ts";

/** The web routes never touch the database; any use of this one fails the test. */
const noDatabase: Database = {
  kind: "pglite",
  query: () => Promise.reject(new Error("the web UI used the database")),
  exec: () => Promise.reject(new Error("the web UI used the database")),
  transaction: () => Promise.reject(new Error("the web UI used the database")),
  listen: () => Promise.reject(new Error("the web UI used the database")),
  notify: () => Promise.reject(new Error("the web UI used the database")),
  close: async () => {},
};

describe("the web UI", () => {
  let dir: string;
  let built: FastifyInstance;
  let unbuilt: FastifyInstance;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "tether-web-"));
    const root = path.join(dir, "dist");
    await mkdir(path.join(root, "assets"), { recursive: true });
    await writeFile(path.join(root, "index.html"), "<!doctype html><title>Tether UI</title>");
    await writeFile(path.join(root, "assets", "app.js"), "console.log('ui')");
    await writeFile(path.join(dir, "secret.txt"), "outside the web root");
    built = await createApi({ db: noDatabase, buffer: new StreamBuffer(), webRoot: root });
    unbuilt = await createApi({ db: noDatabase, buffer: new StreamBuffer() });
  });
  afterAll(async () => {
    await built.close();
    await unbuilt.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("GET / without a web root is a page saying the UI is not built and pointing to the API", async () => {
    const res = await unbuilt.inject({ method: "GET", url: "/" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("text/html");
    expect(res.body).toContain("not built yet");
    expect(res.body).toContain("/api/v1");
  });

  it("GET / serves webRoot/index.html, files under the root, and index.html for the UI's own routes", async () => {
    const index = await built.inject({ method: "GET", url: "/" });
    expect(index.statusCode).toBe(200);
    expect(index.body).toContain("Tether UI");
    const js = await built.inject({ method: "GET", url: "/assets/app.js" });
    expect(js.statusCode).toBe(200);
    expect(js.headers["content-type"]).toContain("javascript");
    const route = await built.inject({ method: "GET", url: "/chats/123" });
    expect(route.body).toContain("Tether UI");
    expect((await built.inject({ method: "GET", url: "/assets/missing.js" })).statusCode).toBe(404);
  });

  it("never serves a file outside the web root", async () => {
    for (const url of ["/../secret.txt", "/%2e%2e/secret.txt", "/assets/..%2f..%2fsecret.txt"]) {
      const res = await built.inject({ method: "GET", url });
      expect(res.body, url).not.toContain("outside the web root");
    }
  });

  it("an unknown API path is a JSON 404, not the UI", async () => {
    const res = await built.inject({ method: "GET", url: "/api/v1/nothing" });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ message: expect.any(String), code: "not_found" });
  });
});
