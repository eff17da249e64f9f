// Small pieces the admin and token pages share: loading a resource, running an action that
// may fail, showing the server's error (its detail names the bad field), a two-step
// confirmation, and formatting of times, durations and prices.

import { useCallback, useEffect, useState, type ReactNode } from "react";
import { api, ApiError } from "./api.ts";

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  /** Loads again; the old data stays shown meanwhile. */
  reload: () => void;
}

/**
 * `GET path` (nothing while it is undefined), again whenever `reload` is called or `refresh`
 * changes. An answer to a request that a newer one replaced is dropped.
 */
export function useApi<T>(path: string | undefined, refresh?: unknown): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<unknown>();
  const [n, setN] = useState(0);
  useEffect(() => {
    if (path === undefined) return;
    let live = true;
    api<T>("GET", path).then(
      (d) => {
        if (!live) return;
        setData(d);
        setError(undefined);
      },
      (e: unknown) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [path, n, refresh]);
  const reload = useCallback(() => setN((x) => x + 1), []);
  return { data, error, reload };
}

/** Calls `fn` every `ms` milliseconds while `ms` is set (polling what has no stream). */
export function useInterval(fn: () => void, ms: number | undefined): void {
  useEffect(() => {
    if (ms === undefined) return;
    const t = setInterval(fn, ms);
    return () => clearInterval(t);
  }, [fn, ms]);
}

/** 950 ms, 12.3 s: a run time. */
export function seconds(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/**
 * Runs one change at a time: `busy` names the one in flight (to disable its buttons), `error`
 * is the last failure until the next run. `run` resolves true when the change succeeded.
 */
export function useAction(): {
  run: (key: string, fn: () => Promise<unknown>) => Promise<boolean>;
  busy: string | undefined;
  error: unknown;
  clearError: () => void;
} {
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<unknown>();
  const run = useCallback(async (key: string, fn: () => Promise<unknown>) => {
    setBusy(key);
    setError(undefined);
    try {
      await fn();
      return true;
    } catch (e) {
      setError(e);
      return false;
    } finally {
      setBusy(undefined);
    }
  }, []);
  return { run, busy, error, clearError: useCallback(() => setError(undefined), []) };
}

/**
 * The server's message and, when it gave one, its detail (which names the bad field: "password:
 * must be at least 8 characters") and, for a throttled request, when to try again.
 */
export function ErrorNote({ error, prefix }: { error: unknown; prefix?: string }) {
  if (error === undefined) return null;
  const notThere = error instanceof ApiError && error.status === 404 && prefix === undefined;
  const message = notThere
    ? "Not available on this server."
    : error instanceof Error
      ? error.message
      : typeof error === "string"
        ? error
        : "Something went wrong.";
  const api = error instanceof ApiError && !notThere ? error : undefined;
  // The throttle's detail may say the wait already ("Retry after 60 s.").
  const wait =
    api?.retryAfterS !== undefined && !/retry after/i.test(api.detail ?? "")
      ? ` Try again in ${duration(api.retryAfterS * 1000)}.`
      : "";
  return (
    <p className="error" role="alert">
      {prefix && `${prefix}: `}
      <strong>{message}</strong>
      {api?.detail && <> {api.detail}</>}
      {wait}
    </p>
  );
}

/** The browser tab's title while the component is shown: "<title> · Tether". */
export function useDocumentTitle(title: string | undefined): void {
  useEffect(() => {
    document.title = title ? `${title} · Tether` : "Tether";
  }, [title]);
}

/**
 * A table in a box that scrolls sideways on a narrow screen (the page itself never does), or,
 * with `stack`, shows each row as a card there: every cell then needs its `data-label`.
 */
export function TableBox(p: { label: string; stack?: boolean; children: ReactNode }) {
  const { label, stack = false, children } = p;
  return (
    // Focusable so a keyboard can scroll it; labelled so a screen reader says what it is.
    <div
      className={stack ? "scroll table-box stack" : "scroll table-box"}
      tabIndex={0}
      role="region"
      aria-label={label}
    >
      <table>{children}</table>
    </div>
  );
}

/**
 * A destructive button that asks first: the first press shows "prompt [confirm] [Cancel]",
 * with the focus on Cancel, so a stray double press does nothing.
 */
export function ConfirmButton(p: {
  label: string;
  /** Spoken and shown for the first button, e.g. "Delete gpt-4o". */
  accessibleLabel?: string;
  prompt: string;
  confirmLabel: string;
  disabled?: boolean;
  onConfirm: () => void;
}) {
  const [asking, setAsking] = useState(false);
  if (!asking)
    return (
      <button
        type="button"
        className="danger-outline small"
        disabled={p.disabled}
        aria-label={p.accessibleLabel}
        onClick={() => setAsking(true)}
      >
        {p.label}
      </button>
    );
  return (
    <span className="confirm" role="group" aria-label={p.prompt}>
      <span>{p.prompt}</span>
      <button
        type="button"
        className="danger small"
        disabled={p.disabled}
        onClick={() => {
          setAsking(false);
          p.onConfirm();
        }}
      >
        {p.confirmLabel}
      </button>
      <button type="button" className="secondary small" autoFocus onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/**
 * A date and time in the reader's locale, the exact instant on hover. `compact` leaves out
 * today's date and this year's year.
 */
export function When(p: { iso: string | null; style?: "medium" | "compact" | "time" }) {
  const { iso, style = "medium" } = p;
  if (iso === null) return <span className="muted">never</span>;
  const d = new Date(iso);
  const now = new Date();
  const text =
    style === "time"
      ? d.toLocaleTimeString(undefined, { timeStyle: "medium" })
      : style === "compact"
        ? d.toDateString() === now.toDateString()
          ? d.toLocaleTimeString(undefined, { timeStyle: "short" })
          : d.toLocaleString(undefined, {
              month: "short",
              day: "numeric",
              ...(d.getFullYear() !== now.getFullYear() && { year: "numeric" }),
              hour: "numeric",
              minute: "2-digit",
            })
        : d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  return (
    <time dateTime={iso} title={d.toString()}>
      {text}
    </time>
  );
}

/** 42 s, 5 min, 3 h 12 min, 4 days. */
export function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 48) return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
  return `${Math.floor(h / 24)} days`;
}

const USD = new Intl.NumberFormat("en-US", {
  style: "currency",
  currency: "USD",
  minimumFractionDigits: 2,
  maximumFractionDigits: 6,
});

/** Integer micro-dollars as dollars: 3000000 → $3.00, 75000 → $0.075. */
export function usd(micros: number): string {
  return USD.format(micros / 1e6);
}

/** A dollar amount typed in a form as integer micro-dollars, or undefined when left empty. */
export function dollarsToMicros(s: string): number | undefined {
  return s.trim() === "" ? undefined : Math.round(Number(s) * 1e6);
}

/** A form field's text (FormData gives strings for text inputs). */
export function text(f: FormData, name: string): string {
  const v = f.get(name);
  return typeof v === "string" ? v : "";
}
