import { describe, expect, it } from "vitest";
import { SCRUBBED, Scrubber } from "./scrub.ts";

function run(secrets: string[], chunks: string[]): string {
  const s = new Scrubber(secrets);
  return chunks.map((c) => s.push(c)).join("") + s.flush();
}

describe("Scrubber", () => {
  it("replaces every occurrence of a secret", () => {
    expect(run(["tok123"], ["a tok123 b tok123"])).toBe(`a ${SCRUBBED} b ${SCRUBBED}`);
  });

  it("a secret split across chunks is still replaced", () => {
    expect(run(["secret-token"], ["x=secr", "et-to", "ken;"])).toBe(`x=${SCRUBBED};`);
    // One character a chunk.
    expect(run(["abcdef"], [..."--abcdef--"])).toBe(`--${SCRUBBED}--`);
  });

  it("holds back only what could start a secret, and passes the rest on at once", () => {
    const s = new Scrubber(["secret"]);
    expect(s.push("hello sec")).toBe("hello ");
    expect(s.push("ond")).toBe("second");
    expect(s.push(" done")).toBe(" done");
    expect(s.flush()).toBe("");
  });

  it("a prefix left at the end is flushed as it is", () => {
    expect(run(["secret"], ["value: sec"])).toBe("value: sec");
  });

  it("empty secrets are ignored", () => {
    expect(run([""], ["text"])).toBe("text");
  });
});
