// The provider registry: turns a model spec (`anthropic:<model>`, ..., `demo`) into an AI SDK
// language model. Creating a model never touches the network; keys are read from the config,
// then TETHER_MODEL_API_KEY, then the provider's own environment variable, in that order. A
// provider's package is loaded when its first model is made: a server runs one or two of the
// five, and loading them all took ~150 ms of every start.

import type { LanguageModelV3 } from "@ai-sdk/provider";
import { createDemoModel } from "./demo.ts";
import { httpFetch } from "./http-fetch.ts";

/** A model as the AI SDK's providers make it (interface version 3): what streamStep calls. */
export type LanguageModel = LanguageModelV3;

/** The providers a spec may name, in the order the docs list them. */
export const PROVIDER_NAMES = [
  "anthropic",
  "openai",
  "google",
  "bedrock",
  "openai-compatible",
  "demo",
] as const;

export type ProviderName = (typeof PROVIDER_NAMES)[number];

/** A parsed `--model` spec. */
export interface ModelSpec {
  provider: ProviderName;
  /** The provider's model ID; `"demo"` for the demo model. */
  model: string;
}

/** Where `createLanguageModel` gets its model and credentials. */
export interface LanguageModelConfig {
  provider: ProviderName;
  /** The provider's model ID, passed through unchanged. */
  model: string;
  /** The API's base URL; required for `openai-compatible`, optional for the others. */
  baseUrl?: string;
  /** The API key; when absent, TETHER_MODEL_API_KEY, then the provider's usual variable. */
  apiKey?: string;
}

/** The variable that overrides every provider's own key variable. */
export const TETHER_MODEL_API_KEY = "TETHER_MODEL_API_KEY";

/** The forms `--model` accepts, for error messages and help. */
export const MODEL_SPEC_FORMS =
  "anthropic:<model>, openai:<model>, google:<model>, bedrock:<model>, " +
  "openai-compatible:<model> (with --model-base-url), or demo";

/**
 * The model used when a provider's key is set and no `--model` is given, checked in this
 * order. Bedrock is absent on purpose: the AWS credential chain is too easy to have by accident.
 */
const DEFAULT_MODELS: readonly { envVar: string; spec: string }[] = [
  { envVar: "ANTHROPIC_API_KEY", spec: "anthropic:claude-sonnet-4-5" },
  { envVar: "OPENAI_API_KEY", spec: "openai:gpt-5" },
  { envVar: "GOOGLE_GENERATIVE_AI_API_KEY", spec: "google:gemini-2.5-pro" },
];

/** A model spec or config that cannot be used; the message says what to write instead. */
export class ModelSpecError extends Error {
  override readonly name = "ModelSpecError";
}

function isProviderName(name: string): name is ProviderName {
  return (PROVIDER_NAMES as readonly string[]).includes(name);
}

/** Parses a `--model` spec; throws ModelSpecError naming the accepted forms otherwise. */
export function parseModelSpec(spec: string): ModelSpec {
  const trimmed = spec.trim();
  if (trimmed === "demo") return { provider: "demo", model: "demo" };
  const colon = trimmed.indexOf(":");
  const provider = colon < 0 ? trimmed : trimmed.slice(0, colon);
  const model = colon < 0 ? "" : trimmed.slice(colon + 1).trim();
  if (!isProviderName(provider) || provider === "demo") {
    throw new ModelSpecError(
      `Unknown model spec ${JSON.stringify(spec)}. Use ${MODEL_SPEC_FORMS}.`,
    );
  }
  if (model === "") {
    throw new ModelSpecError(
      `The model spec ${JSON.stringify(spec)} names no model. Write ${provider}:<model>, ` +
        `for example ${exampleSpec(provider)}.`,
    );
  }
  return { provider, model };
}

function exampleSpec(provider: Exclude<ProviderName, "demo">): string {
  switch (provider) {
    case "anthropic":
      return "anthropic:claude-sonnet-4-5";
    case "openai":
      return "openai:gpt-5";
    case "google":
      return "google:gemini-2.5-pro";
    case "bedrock":
      return "bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0";
    case "openai-compatible":
      return "openai-compatible:llama3.1 --model-base-url http://127.0.0.1:11434/v1";
    default: {
      const unreachable: never = provider;
      return unreachable;
    }
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

/**
 * Creates the language model for a config, loading its provider's package the first time. No
 * request is made until the model is called.
 * An absent key is left to the provider, which reads its usual environment variable
 * (ANTHROPIC_API_KEY, OPENAI_API_KEY, GOOGLE_GENERATIVE_AI_API_KEY, the AWS chain).
 */
export async function createLanguageModel(
  config: LanguageModelConfig,
  env: NodeJS.ProcessEnv = process.env,
): Promise<LanguageModel> {
  const apiKey = nonEmpty(config.apiKey) ?? nonEmpty(env[TETHER_MODEL_API_KEY]);
  const baseURL = nonEmpty(config.baseUrl);
  // Every provider's requests go out through node:http (http-fetch.ts).
  const settings = { fetch: httpFetch, ...(apiKey && { apiKey }), ...(baseURL && { baseURL }) };
  switch (config.provider) {
    case "anthropic":
      return (await import("@ai-sdk/anthropic")).createAnthropic(settings)(config.model);
    case "openai":
      return (await import("@ai-sdk/openai")).createOpenAI(settings)(config.model);
    case "google":
      return (await import("@ai-sdk/google")).createGoogleGenerativeAI(settings)(config.model);
    case "bedrock":
      return (await import("@ai-sdk/amazon-bedrock")).createAmazonBedrock(settings)(config.model);
    case "openai-compatible": {
      if (baseURL === undefined) {
        throw new ModelSpecError(
          `The openai-compatible provider needs a base URL: pass --model-base-url ` +
            `(for example http://127.0.0.1:11434/v1 for Ollama).`,
        );
      }
      // includeUsage asks the server for token counts at the end of the stream.
      const { createOpenAICompatible } = await import("@ai-sdk/openai-compatible");
      return createOpenAICompatible({
        name: "openai-compatible",
        baseURL,
        includeUsage: true,
        fetch: httpFetch,
        ...(apiKey && { apiKey }),
      }).chatModel(config.model);
    }
    case "demo":
      return createDemoModel();
    default: {
      const unreachable: never = config.provider;
      throw new ModelSpecError(`Unknown provider ${String(unreachable)}. Use ${MODEL_SPEC_FORMS}.`);
    }
  }
}

/** The spec to use without `--model`: the first provider whose key is set, else `demo`. */
export function defaultModelSpec(env: NodeJS.ProcessEnv = process.env): string {
  for (const { envVar, spec } of DEFAULT_MODELS) {
    if (nonEmpty(env[envVar]) !== undefined) return spec;
  }
  return "demo";
}
