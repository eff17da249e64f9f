import { randomBytes, randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { describeDatabases } from "../../../test/support/db.ts";
import { createSecretBox } from "./box.ts";
import { SLOTS, sealAtRest } from "./columns.ts";

const key = () => randomBytes(32);

describeDatabases("secrets at rest", (db) => {
  const insertPlaintext = async () => {
    const model = randomUUID();
    const workspace = randomUUID();
    await db().query(
      "INSERT INTO model_configs (id, provider, model, api_key) VALUES ($1, 'openai', 'm', 'sk-plain')",
      [model],
    );
    await db().query(
      "INSERT INTO workspaces (id, name, agent_url, agent_token) VALUES ($1, 'w', 'http://127.0.0.1:1', 'tok-plain')",
      [workspace],
    );
    await db().query("INSERT INTO replica_secret (secret) VALUES ('replica-plain')");
    return { model, workspace };
  };
  const stored = async () => ({
    apiKey: (await db().query("SELECT api_key FROM model_configs")).rows[0]!.api_key as string,
    agentToken: (await db().query("SELECT agent_token FROM workspaces")).rows[0]!
      .agent_token as string,
    replica: (await db().query("SELECT secret FROM replica_secret")).rows[0]!.secret as string,
  });

  it("plaintext from an older database is sealed at the first start with a key, once", async () => {
    const { model, workspace } = await insertPlaintext();
    const box = createSecretBox({ current: key() });
    expect(await sealAtRest(db(), box)).toMatchObject({ sealed: 3, resealed: 0, unopenable: [] });
    const s = await stored();
    expect(JSON.stringify(s)).not.toMatch(/plain/);
    expect(box.open(s.apiKey, SLOTS.modelApiKey(model))).toBe("sk-plain");
    expect(box.open(s.agentToken, SLOTS.agentToken(workspace))).toBe("tok-plain");
    expect(box.open(s.replica, SLOTS.replicaSecret())).toBe("replica-plain");
    expect(await sealAtRest(db(), box)).toMatchObject({ sealed: 0, resealed: 0, unopenable: [] });
    expect(await stored()).toEqual(s);
  });

  it("rotation: with the old key set, everything it sealed is sealed again with the new one", async () => {
    const { model, workspace } = await insertPlaintext();
    const oldKey = key();
    const newKey = key();
    await sealAtRest(db(), createSecretBox({ current: oldKey }));
    const rotating = createSecretBox({ current: newKey, old: [oldKey] });
    expect(await sealAtRest(db(), rotating)).toMatchObject({
      sealed: 0,
      resealed: 3,
      unopenable: [],
    });
    // The new key alone now opens everything.
    const only = createSecretBox({ current: newKey });
    const s = await stored();
    for (const v of Object.values(s)) expect(only.isCurrent(v)).toBe(true);
    expect(only.open(s.apiKey, SLOTS.modelApiKey(model))).toBe("sk-plain");
    expect(only.open(s.agentToken, SLOTS.agentToken(workspace))).toBe("tok-plain");
    expect(only.open(s.replica, SLOTS.replicaSecret())).toBe("replica-plain");
  });

  it("a value sealed with a key the server does not have is reported and left as it is", async () => {
    await insertPlaintext();
    const lost = createSecretBox({ current: key() });
    await sealAtRest(db(), lost);
    const before = await stored();
    const other = createSecretBox({ current: key() });
    const report = await sealAtRest(db(), other);
    expect(report.sealed + report.resealed).toBe(0);
    expect(report.unopenable).toHaveLength(3);
    expect(report.unopenable[0]!.keyId).toBe(lost.keyId);
    expect(await stored()).toEqual(before);
  });
});
