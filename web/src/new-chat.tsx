// A new chat: the first message, the model (among the enabled ones) and the workspace to run
// in — an existing one, or a new one made from a template (created first; the chat's turn
// waits for it to start). The chat is created with its message in one request (the server
// titles it by the message).

import { useState, type FormEvent, type KeyboardEvent } from "react";
import type { ModelView } from "../../src/api/views.ts";
import { api } from "./api.ts";
import type { Chat } from "./types.ts";
import { navigate } from "./router.ts";
import { ErrorNote, useApi } from "./widgets.tsx";
import { statusText, type AnyWorkspace, type Template } from "./workspace-types.ts";

/** The workspace choice that makes a new one from a template. */
const FROM_TEMPLATE = "new-from-template";

export function NewChat() {
  // Empty selections mean "the default" (the server's choice), so the page works before
  // these lists answer, or if they fail.
  const models = useApi<{ models: ModelView[] }>("/models").data?.models.filter((m) => m.enabled);
  const workspaces = useApi<{ workspaces: AnyWorkspace[] }>("/workspaces").data?.workspaces;
  const templates = useApi<{ templates: Template[] }>("/templates").data?.templates;
  const [templateId, setTemplateId] = useState("");
  const [workspaceName, setWorkspaceName] = useState("");
  const [modelId, setModelId] = useState("");
  const [workspaceId, setWorkspaceId] = useState("");
  const [text, setText] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);

  const create = async (e?: FormEvent) => {
    e?.preventDefault();
    if (text.trim() === "") return;
    setBusy(true);
    setError(undefined);
    try {
      let chosen = workspaceId;
      if (workspaceId === FROM_TEMPLATE) {
        const template = templateId || templates?.[0]?.id;
        if (!template) throw new Error("Pick a template.");
        const w = await api<{ id: string }>("POST", "/workspaces", {
          name: workspaceName.trim() || text.trim().split("\n")[0]!.slice(0, 60),
          template_id: template,
        });
        chosen = w.id;
      }
      const chat = await api<Chat>("POST", "/chats", {
        message: text,
        ...(modelId && { model_id: modelId }),
        ...(chosen && { workspace_id: chosen }),
      });
      navigate(`/chats/${chat.id}`);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      void create();
    }
  };

  return (
    <section className="narrow-form">
      <h1>New chat</h1>
      <form className="stack" onSubmit={(e) => void create(e)}>
        <div className="row">
          <label className="grow">
            Model
            <select value={modelId} onChange={(e) => setModelId(e.target.value)}>
              <option value="">Default</option>
              {models?.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.model} ({m.provider}){m.is_default ? " · default" : ""}
                </option>
              ))}
            </select>
          </label>
          <label className="grow">
            Workspace
            <select value={workspaceId} onChange={(e) => setWorkspaceId(e.target.value)}>
              <option value="">Default</option>
              {workspaces?.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.name}
                  {/* A template workspace says its status; a registered one, whether it answers. */}
                  {w.status && w.agent
                    ? ` (${statusText({ status: w.status, agent: w.agent })})`
                    : w.health && !w.health.reachable
                      ? " (unreachable)"
                      : ""}
                </option>
              ))}
              {templates && templates.length > 0 && (
                <option value={FROM_TEMPLATE}>New workspace from a template…</option>
              )}
            </select>
          </label>
        </div>
        {workspaceId === FROM_TEMPLATE && templates && (
          <div className="row">
            <label className="grow">
              Template
              <select value={templateId} onChange={(e) => setTemplateId(e.target.value)}>
                {templates.map((t) => (
                  <option key={t.id} value={t.id}>
                    {t.name}
                    {t.description && ` — ${t.description}`}
                  </option>
                ))}
              </select>
            </label>
            <label className="grow">
              Workspace name
              <input
                value={workspaceName}
                onChange={(e) => setWorkspaceName(e.target.value)}
                placeholder="(from the message)"
                autoComplete="off"
              />
            </label>
          </div>
        )}
        <label>
          Message
          <textarea
            value={text}
            onChange={(e) => setText(e.target.value)}
            onKeyDown={onKey}
            rows={5}
            placeholder="What should the agent do? (Enter sends, Shift+Enter is a new line)"
            autoFocus
          />
        </label>
        <ErrorNote error={error} prefix="The chat was not started" />
        <div>
          <button type="submit" disabled={busy || text.trim() === ""}>
            Start chat
          </button>
        </div>
      </form>
    </section>
  );
}
