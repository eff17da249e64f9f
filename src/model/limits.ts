// The context limits (tokens) of models whose providers publish them, by model name prefix, so a
// model row without `context_limit` still compacts at the right size. Unknown: undefined (chatd
// then uses its documented default, prompt/compaction.ts DEFAULT_CONTEXT_LIMIT_TOKENS).

/** Longest prefix first within a provider; the first match wins. */
const KNOWN: { provider: string; prefix: string; tokens: number }[] = [
  { provider: "anthropic", prefix: "claude-", tokens: 200_000 },
  { provider: "bedrock", prefix: "anthropic.claude-", tokens: 200_000 },
  { provider: "openai", prefix: "gpt-5", tokens: 400_000 },
  { provider: "openai", prefix: "gpt-4.1", tokens: 1_047_576 },
  { provider: "openai", prefix: "gpt-4o", tokens: 128_000 },
  { provider: "openai", prefix: "o3", tokens: 200_000 },
  { provider: "openai", prefix: "o4-mini", tokens: 200_000 },
  { provider: "google", prefix: "gemini-2.5-", tokens: 1_048_576 },
  { provider: "google", prefix: "gemini-2.0-", tokens: 1_048_576 },
  { provider: "demo", prefix: "demo", tokens: 128_000 },
];

export function knownContextLimit(provider: string, model: string): number | undefined {
  return KNOWN.find((k) => k.provider === provider && model.startsWith(k.prefix))?.tokens;
}
