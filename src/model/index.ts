// The model module: the provider registry over the Vercel AI SDK and the offline demo model.
// chatd gets every model from here, so a spec means the same thing everywhere.
export {
  createLanguageModel,
  defaultModelSpec,
  parseModelSpec,
  ModelSpecError,
  MODEL_SPEC_FORMS,
  PROVIDER_NAMES,
  TETHER_MODEL_API_KEY,
  type LanguageModel,
  type LanguageModelConfig,
  type ModelSpec,
  type ProviderName,
} from "./registry.ts";
export { createDemoModel, DEMO_MODEL_ID, DEMO_PROVIDER, type DemoModelOptions } from "./demo.ts";
export { DEMO_HELP_TEXT } from "./demo-reply.ts";
export { knownContextLimit } from "./limits.ts";
export { streamStep, type StepPart, type StepRequest } from "./step.ts";
