// Models: every config (staff see the disabled ones too) with enable/disable, make default and
// delete, and the form that adds one. The API key is write-only: the form sends it, the list
// only says whether one is set. The form's fields are uncontrolled, so nothing typed into them
// (the key above all) is ever copied into the page's HTML as a value attribute.

import { useState, type FormEvent } from "react";
import { api } from "../api.ts";
import type { ModelChange, ModelView, NewModel, ProviderName } from "../types.ts";
import {
  ConfirmButton,
  dollarsToMicros,
  ErrorNote,
  TableBox,
  text,
  usd,
  useAction,
  useApi,
} from "../widgets.tsx";

/** Every provider the server takes (a Record, so a new one fails the type check until named). */
const PROVIDERS: Record<ProviderName, { label: string; example: string }> = {
  anthropic: { label: "Anthropic", example: "claude-sonnet-4-5" },
  openai: { label: "OpenAI", example: "gpt-5" },
  google: { label: "Google", example: "gemini-2.5-pro" },
  bedrock: { label: "Amazon Bedrock", example: "anthropic.claude-sonnet-4-5-v1:0" },
  "openai-compatible": { label: "OpenAI-compatible", example: "llama-3.3-70b" },
  demo: { label: "Demo (offline)", example: "demo" },
};

const providerLabel = (p: string): string =>
  (PROVIDERS as Record<string, { label: string } | undefined>)[p]?.label ?? p;

export function ModelsSection() {
  const { data, error, reload } = useApi<{ models: ModelView[] }>("/models");
  const action = useAction();
  const change = (m: ModelView, what: string, body: ModelChange) =>
    void action.run(`${m.id} ${what}`, async () => {
      await api("PATCH", `/models/${m.id}`, body);
      reload();
    });

  return (
    <section aria-labelledby="models-h">
      <h2 id="models-h">Models</h2>
      <p className="muted">
        The models chats can use. A chat that names none gets the default. Prices are in dollars per
        million tokens.
      </p>
      <ErrorNote error={error} />
      <ErrorNote error={action.error} prefix="Could not change the model" />
      {data === undefined && error === undefined && <p>Loading…</p>}
      {data && data.models.length === 0 && <p className="muted">No models yet: add one below.</p>}
      {data && data.models.length > 0 && (
        <TableBox label="Models" stack>
          <thead>
            <tr>
              <th scope="col">Model</th>
              <th scope="col">Provider</th>
              <th scope="col">Base URL</th>
              <th scope="col" className="num">
                Context
              </th>
              <th scope="col" className="num">
                Input $/M
              </th>
              <th scope="col" className="num">
                Output $/M
              </th>
              <th scope="col">Key set</th>
              <th scope="col">Status</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {data.models.map((m) => {
              const busy = action.busy?.startsWith(m.id) ?? false;
              return (
                <tr key={m.id} data-testid="model-row" className={m.enabled ? "" : "dim"}>
                  <th scope="row">{m.model}</th>
                  <td data-label="Provider">{providerLabel(m.provider)}</td>
                  <td data-label="Base URL" className="clip" title={m.base_url ?? undefined}>
                    {m.base_url ?? <span className="muted">provider default</span>}
                  </td>
                  <td data-label="Context" className="num">
                    {m.context_limit === null ? (
                      <span className="muted">—</span>
                    ) : (
                      m.context_limit.toLocaleString("en-US")
                    )}
                  </td>
                  <td data-label="Input $/M" className="num">
                    {usd(m.input_price_per_mtok_micros)}
                  </td>
                  <td data-label="Output $/M" className="num">
                    {usd(m.output_price_per_mtok_micros)}
                  </td>
                  <td data-label="Key set">
                    {m.has_api_key ? "yes" : <span className="muted">no</span>}
                  </td>
                  <td data-label="Status">
                    <span className="badges">
                      {m.is_default && <span className="badge ok">default</span>}
                      <span className={m.enabled ? "badge" : "badge off"}>
                        {m.enabled ? "enabled" : "disabled"}
                      </span>
                    </span>
                  </td>
                  <td className="actions-cell">
                    <span className="actions">
                      <button
                        type="button"
                        className="secondary small"
                        // The server keeps the default enabled (new chats get it).
                        disabled={busy || (m.enabled && m.is_default)}
                        title={
                          m.enabled && m.is_default
                            ? "The default model stays enabled: make another one the default first."
                            : undefined
                        }
                        aria-label={`${m.enabled ? "Disable" : "Enable"} ${m.model}`}
                        onClick={() => change(m, "enabled", { enabled: !m.enabled })}
                      >
                        {m.enabled ? "Disable" : "Enable"}
                      </button>
                      {!m.is_default && m.enabled && (
                        <button
                          type="button"
                          className="secondary small"
                          disabled={busy}
                          aria-label={`Make ${m.model} the default`}
                          onClick={() => change(m, "default", { is_default: true })}
                        >
                          Make default
                        </button>
                      )}
                      <ConfirmButton
                        label="Delete"
                        accessibleLabel={`Delete ${m.model}`}
                        prompt={`Delete ${m.model}?`}
                        confirmLabel="Delete model"
                        disabled={busy}
                        onConfirm={() =>
                          void action.run(`${m.id} delete`, async () => {
                            await api("DELETE", `/models/${m.id}`);
                            reload();
                          })
                        }
                      />
                    </span>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </TableBox>
      )}
      {error === undefined && <AddModel onAdded={reload} />}
    </section>
  );
}

function AddModel({ onAdded }: { onAdded: () => void }) {
  const [provider, setProvider] = useState<ProviderName>("openai-compatible");
  const action = useAction();
  const needsUrl = provider === "openai-compatible";

  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    const baseUrl = text(f, "base_url").trim();
    const key = text(f, "api_key");
    const context = text(f, "context_limit").trim();
    const input = dollarsToMicros(text(f, "input_price"));
    const output = dollarsToMicros(text(f, "output_price"));
    const body: NewModel = {
      provider,
      model: text(f, "model"),
      ...(baseUrl !== "" && { base_url: baseUrl }),
      ...(key !== "" && { api_key: key }),
      ...(context !== "" && { context_limit: Number(context) }),
      ...(input !== undefined && { input_price_per_mtok_micros: input }),
      ...(output !== undefined && { output_price_per_mtok_micros: output }),
      is_default: f.get("is_default") === "on",
    };
    void action.run("add", async () => {
      await api("POST", "/models", body);
      form.reset();
      onAdded();
    });
  };

  return (
    <form className="card" aria-labelledby="add-model-h" onSubmit={submit}>
      <h3 id="add-model-h">Add a model</h3>
      <div className="fields">
        <label>
          Provider
          <select
            name="provider"
            value={provider}
            onChange={(e) => setProvider(e.target.value as ProviderName)}
          >
            {(Object.keys(PROVIDERS) as ProviderName[]).map((p) => (
              <option key={p} value={p}>
                {PROVIDERS[p].label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Model
          <input name="model" required placeholder={PROVIDERS[provider].example} />
        </label>
        <label>
          Base URL{needsUrl ? "" : " (optional)"}
          <input
            name="base_url"
            type="url"
            required={needsUrl}
            placeholder="https://api.example.com/v1"
            autoComplete="off"
          />
        </label>
        <label>
          API key (optional)
          <input name="api_key" type="password" autoComplete="new-password" />
        </label>
        <label>
          Context limit (tokens)
          <input name="context_limit" type="number" min={1} step={1} inputMode="numeric" />
        </label>
        <label>
          Input price ($/M tokens)
          <input
            name="input_price"
            type="number"
            min={0}
            step="any"
            inputMode="decimal"
            placeholder="0"
          />
        </label>
        <label>
          Output price ($/M tokens)
          <input
            name="output_price"
            type="number"
            min={0}
            step="any"
            inputMode="decimal"
            placeholder="0"
          />
        </label>
        <label className="check">
          <input name="is_default" type="checkbox" />
          Make it the default
        </label>
      </div>
      <div className="form-end">
        <button type="submit" disabled={action.busy !== undefined}>
          Add model
        </button>
        <ErrorNote error={action.error} prefix="Not added" />
      </div>
    </form>
  );
}
