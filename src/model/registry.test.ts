import { afterEach, describe, expect, it, vi } from "vitest";
import { DEMO_MODEL_ID, DEMO_PROVIDER } from "./demo.ts";
import {
  createLanguageModel,
  defaultModelSpec,
  ModelSpecError,
  parseModelSpec,
  type ProviderName,
} from "./registry.ts";

describe("parseModelSpec", () => {
  it.each([
    ["anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"],
    ["openai:gpt-5", "openai", "gpt-5"],
    ["google:gemini-2.5-pro", "google", "gemini-2.5-pro"],
    // Bedrock IDs carry a colon of their own: only the first colon separates the provider.
    [
      "bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0",
      "bedrock",
      "anthropic.claude-sonnet-4-5-20250929-v1:0",
    ],
    ["openai-compatible:llama3.1:8b", "openai-compatible", "llama3.1:8b"],
    ["demo", "demo", "demo"],
  ])("each accepted form parses: %s", (spec, provider, model) => {
    expect(parseModelSpec(spec)).toEqual({ provider, model });
  });

  it.each(["", "claude", "mistral:large", "demo:x", "ANTHROPIC:claude"])(
    "an unknown form is refused naming every accepted form: %j",
    (spec) => {
      expect(() => parseModelSpec(spec)).toThrow(ModelSpecError);
      expect(() => parseModelSpec(spec)).toThrow(
        /anthropic:<model>, openai:<model>, google:<model>, bedrock:<model>, openai-compatible:<model>.*demo/,
      );
    },
  );

  it("a provider without a model is refused with an example", () => {
    expect(() => parseModelSpec("openai:")).toThrow(/names no model.*openai:gpt-5/);
  });
});

describe("createLanguageModel", () => {
  const fetchSpy = vi.spyOn(globalThis, "fetch");
  afterEach(() => fetchSpy.mockClear());

  it.each<[ProviderName, string, RegExp]>([
    ["anthropic", "claude-sonnet-4-5", /^anthropic\./],
    ["openai", "gpt-5", /^openai\./],
    ["google", "gemini-2.5-pro", /^google\./],
    ["bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", /^amazon-bedrock$/],
  ])(
    "each provider gives a v3 model with its provider and model ID, offline: %s",
    async (p, m, id) => {
      const model = await createLanguageModel({ provider: p, model: m }, {});
      expect(model.specificationVersion).toBe("v3");
      expect(model.provider).toMatch(id);
      expect(model.modelId).toBe(m);
      expect(fetchSpy).not.toHaveBeenCalled();
    },
  );

  it("openai-compatible takes its base URL", async () => {
    const model = await createLanguageModel(
      { provider: "openai-compatible", model: "qwen", baseUrl: "http://127.0.0.1:1/v1" },
      {},
    );
    expect(model.provider).toBe("openai-compatible.chat");
    expect(model.modelId).toBe("qwen");
    expect(fetchSpy).not.toHaveBeenCalled();
  });

  it("openai-compatible without a base URL is a clear error naming the flag", async () => {
    await expect(
      createLanguageModel({ provider: "openai-compatible", model: "qwen" }, {}),
    ).rejects.toThrow(/needs a base URL: pass --model-base-url/);
  });

  it("demo gives the offline demo model", async () => {
    const model = await createLanguageModel({ provider: "demo", model: "demo" }, {});
    expect([model.provider, model.modelId]).toEqual([DEMO_PROVIDER, DEMO_MODEL_ID]);
  });
});

describe("defaultModelSpec", () => {
  it("is demo when no provider key is set", () => {
    expect(defaultModelSpec({})).toBe("demo");
    expect(defaultModelSpec({ ANTHROPIC_API_KEY: "" })).toBe("demo");
  });

  it.each([
    ["ANTHROPIC_API_KEY", "anthropic"],
    ["OPENAI_API_KEY", "openai"],
    ["GOOGLE_GENERATIVE_AI_API_KEY", "google"],
  ])("a set %s picks a model of that provider", (envVar, provider) => {
    const spec = defaultModelSpec({ [envVar]: "k" });
    expect(parseModelSpec(spec).provider).toBe(provider);
  });

  it("anthropic wins when several keys are set", () => {
    expect(defaultModelSpec({ OPENAI_API_KEY: "k", ANTHROPIC_API_KEY: "k" })).toMatch(
      /^anthropic:/,
    );
  });
});
