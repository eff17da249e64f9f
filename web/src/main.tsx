import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { api, onSignedOut } from "./api.ts";
import { AdminPage } from "./admin.tsx";
import { AuthPage } from "./auth.tsx";
import { ChatList, ChatView } from "./chat.tsx";
import { NewChat } from "./new-chat.tsx";
import { navigate, usePath } from "./router.ts";
import { TokensPage } from "./tokens.tsx";
import { UsagePage } from "./usage.tsx";
import { WorkspacesPage } from "./workspaces.tsx";
import { isStaff, type User } from "./types.ts";
import "./style.css";

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

  const newChat = path === "/chats/new";
  const chat = newChat ? null : /^\/chats\/([^/]+)$/.exec(path);
  const admin = path === "/admin" || path.startsWith("/admin/");
  const link = (to: string, label: string) => (
    <a
      href={to}
      aria-current={path === to || (to === "/admin" && admin) ? "page" : undefined}
      onClick={(e) => {
        e.preventDefault();
        navigate(to);
      }}
    >
      {label}
    </a>
  );
  return (
    <>
      <header className="top">
        <strong>Tether</strong>
        <nav>
          {link("/", "Chats")}
          {link("/workspaces", "Workspaces")}
          {link("/usage", "Usage")}
          {link("/tokens", "Tokens")}
          {isStaff(me) && link("/admin", "Admin")}
        </nav>
        <button
          className="link"
          onClick={() => {
            // Ends the session on the server (the token is deleted, the cookie cleared).
            void api("POST", "/auth/logout").finally(() => setMe(null));
          }}
        >
          Sign out
        </button>
      </header>
      <main className={chat || admin ? "page wide" : "page"}>
        {newChat ? (
          <NewChat />
        ) : chat ? (
          <ChatView key={chat[1]} id={chat[1]!} />
        ) : path === "/workspaces" ? (
          <WorkspacesPage />
        ) : path === "/usage" ? (
          <UsagePage me={me} />
        ) : path === "/tokens" ? (
          <TokensPage />
        ) : admin && isStaff(me) ? (
          <AdminPage me={me} path={path} />
        ) : (
          <ChatList />
        )}
      </main>
    </>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
