import { StrictMode, useEffect, useState, type ReactNode } from "react";
import { createRoot } from "react-dom/client";
import { api, onSignedOut } from "./api.ts";
import { AdminPage } from "./admin.tsx";
import { AuthPage } from "./auth.tsx";
import { ChatView } from "./chat.tsx";
import { ChatList } from "./chat-list.tsx";
import { NewChat } from "./new-chat.tsx";
import { navigate, usePath } from "./router.ts";
import { TokensPage } from "./tokens.tsx";
import { UsagePage } from "./usage.tsx";
import { WorkspacesPage } from "./workspaces.tsx";
import { isStaff, type User } from "./types.ts";
import { useDocumentTitle } from "./widgets.tsx";
import "./style.css";

/** The page for an address the UI does not know: said so, with the way back. */
function NotFoundPage({ path }: { path: string }) {
  useDocumentTitle("Page not found");
  return (
    <section className="not-found" data-testid="not-found">
      <h1>Page not found</h1>
      <p>
        Nothing lives at <code>{path}</code>.
      </p>
      <p>
        <a
          href="/"
          onClick={(e) => {
            e.preventDefault();
            navigate("/");
          }}
        >
          Go to your chats
        </a>
      </p>
    </section>
  );
}

interface Route {
  page: ReactNode;
  wide: boolean;
  /** The tab's title, for pages that do not set their own. */
  title?: string;
}

/** Every page by its address; undefined for an address the UI does not know. */
function route(path: string, me: User): Route | undefined {
  if (path === "/" || path === "/chats") return { page: <ChatList />, wide: false };
  if (path === "/chats/new") return { page: <NewChat />, wide: false, title: "New chat" };
  const chat = /^\/chats\/([^/]+)$/.exec(path);
  if (chat) return { page: <ChatView key={chat[1]} id={chat[1]!} />, wide: true };
  if (path === "/workspaces") return { page: <WorkspacesPage />, wide: false, title: "Workspaces" };
  if (path === "/usage") return { page: <UsagePage me={me} />, wide: false, title: "Usage" };
  if (path === "/tokens") return { page: <TokensPage />, wide: false, title: "Tokens" };
  if ((path === "/admin" || path.startsWith("/admin/")) && isStaff(me))
    return { page: <AdminPage me={me} path={path} />, wide: true, title: "Admin" };
  return undefined;
}

function App() {
  const path = usePath();
  // undefined: not known yet (the session cookie, if any, is not readable here: ask).
  const [me, setMe] = useState<User | null | undefined>(undefined);

  useEffect(() => {
    api<User>("GET", "/me").then(setMe, () => setMe(null));
    return onSignedOut(() => setMe(null));
  }, []);

  if (me === undefined) return <p className="page">Loading…</p>;
  if (me === null) return <AuthPage onSignedIn={setMe} />;
  return <SignedIn me={me} path={path} onSignedOut={() => setMe(null)} />;
}

function SignedIn({ me, path, onSignedOut }: { me: User; path: string; onSignedOut: () => void }) {
  const admin = path === "/admin" || path.startsWith("/admin/");
  const chats = path === "/" || path.startsWith("/chats");
  const link = (to: string, label: string, current: boolean) => (
    <a
      href={to}
      aria-current={current ? "page" : undefined}
      onClick={(e) => {
        e.preventDefault();
        navigate(to);
      }}
    >
      {label}
    </a>
  );
  const found = route(path, me);
  const title = found?.title;
  useEffect(() => {
    if (title) document.title = `${title} · Tether`;
  }, [title]);
  return (
    <>
      <header className="top">
        <strong>Tether</strong>
        <nav>
          {link("/", "Chats", chats)}
          {link("/workspaces", "Workspaces", path === "/workspaces")}
          {link("/usage", "Usage", path === "/usage")}
          {link("/tokens", "Tokens", path === "/tokens")}
          {isStaff(me) && link("/admin", "Admin", admin)}
        </nav>
        <button
          className="link"
          onClick={() => {
            // Ends the session on the server (the token is deleted, the cookie cleared).
            void api("POST", "/auth/logout").finally(onSignedOut);
          }}
        >
          Sign out
        </button>
      </header>
      <main className={found?.wide ? "page wide" : "page"}>
        {found ? found.page : <NotFoundPage path={path} />}
      </main>
    </>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
