// The admin pages (staff only: main.tsx links them for owners and admins, and the server
// answers 403 to anyone else): one section at a time, each at its own address under /admin so
// a link, a reload and the back button keep it. Everyone's own API tokens are at /tokens.

import { AuditSection } from "./admin/audit.tsx";
import { ModelsSection } from "./admin/models.tsx";
import { TemplatesSection } from "./admin/templates.tsx";
import { UsersSection } from "./admin/users.tsx";
import { WorkspacesSection } from "./admin/workspaces.tsx";
import { navigate } from "./router.ts";
import type { User } from "./types.ts";

const SECTIONS = [
  { path: "/admin/models", label: "Models" },
  { path: "/admin/templates", label: "Templates" },
  { path: "/admin/workspaces", label: "Workspaces" },
  { path: "/admin/users", label: "Users" },
  { path: "/admin/audit", label: "Audit log" },
] as const;

export function AdminPage({ me, path }: { me: User; path: string }) {
  // `/admin` itself (the header's link) is the first section.
  const current = SECTIONS.find((s) => s.path === path) ?? SECTIONS[0];
  return (
    <>
      <h1>Admin</h1>
      <nav className="tabs" aria-label="Admin sections">
        {SECTIONS.map((s) => (
          <a
            key={s.path}
            href={s.path}
            aria-current={s === current ? "page" : undefined}
            onClick={(e) => {
              e.preventDefault();
              navigate(s.path);
            }}
          >
            {s.label}
          </a>
        ))}
      </nav>
      {current.path === "/admin/models" ? (
        <ModelsSection />
      ) : current.path === "/admin/templates" ? (
        <TemplatesSection />
      ) : current.path === "/admin/workspaces" ? (
        <WorkspacesSection />
      ) : current.path === "/admin/users" ? (
        <UsersSection me={me} />
      ) : (
        <AuditSection />
      )}
    </>
  );
}
