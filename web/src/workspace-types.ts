// The shapes of template workspaces, templates and builds as the API answers them: the
// server's own types (type-only imports: nothing of the server ships to the browser).

import type { z } from "zod";
import type { NewTemplateWorkspaceBody } from "../../src/api/template-workspaces.ts";
import type { NewTemplateBody, TemplatePatch } from "../../src/api/templates.ts";
import type { TemplateWorkspaceFields } from "../../src/api/template-workspaces.ts";
import type { WorkspaceView } from "../../src/api/views.ts";

export type { BuildView as Build } from "../../src/api/template-workspaces.ts";
export type { TemplateView as Template } from "../../src/api/templates.ts";
export type { WorkspaceEvent } from "../../src/api/workspace-events.ts";

/** A workspace as listed: registered (health) or from a template (status, deadline, …). */
export type AnyWorkspace = WorkspaceView & Partial<TemplateWorkspaceFields>;
export type WorkspaceStatus = TemplateWorkspaceFields["status"];

export type NewTemplate = z.input<typeof NewTemplateBody>;
export type TemplateChange = z.input<typeof TemplatePatch>;
export type NewTemplateWorkspace = z.input<typeof NewTemplateWorkspaceBody>;

/** What a status means to the reader. */
export function statusText(w: Pick<TemplateWorkspaceFields, "status" | "agent">): string {
  switch (w.status) {
    case "starting":
      return "starting";
    case "running":
      return w.agent.connected ? "running" : "running, agent connecting";
    case "stopping":
      return "stopping";
    case "stopped":
      return "stopped";
    case "deleting":
      return "deleting";
    case "failed":
      return "failed";
  }
}
