import { expect, it } from "vitest";
import { describeDatabases } from "../../test/support/db.ts";
import { holdLifecycleLease, releaseLifecycleLease } from "./lifecycle.ts";

const A = "00000000-0000-4000-8000-00000000000a";
const B = "00000000-0000-4000-8000-00000000000b";
const HOUR_MS = 3_600_000;

describeDatabases("the lifecycle lease (one replica judges idle workspaces)", (db) => {
  it("one holder at a time: it renews, others are refused until it goes silent or lets go", async () => {
    expect(await holdLifecycleLease(db(), A, HOUR_MS)).toBe(true);
    expect(await holdLifecycleLease(db(), B, HOUR_MS)).toBe(false);
    expect(await holdLifecycleLease(db(), A, HOUR_MS)).toBe(true);
    // A holder whose heartbeat is older than the lease is replaced, and then refused itself.
    // (Older than a lease of 0 once the database clock moved on: PGlite's ticks in milliseconds,
    // and a renewal and this call can fall in one tick.)
    await new Promise((r) => setTimeout(r, 5));
    expect(await holdLifecycleLease(db(), B, 0)).toBe(true);
    expect(await holdLifecycleLease(db(), A, HOUR_MS)).toBe(false);
    // Letting go of a lease one does not hold changes nothing; the holder's release frees it.
    await releaseLifecycleLease(db(), A);
    expect(await holdLifecycleLease(db(), A, HOUR_MS)).toBe(false);
    await releaseLifecycleLease(db(), B);
    expect(await holdLifecycleLease(db(), A, HOUR_MS)).toBe(true);
  });
});
