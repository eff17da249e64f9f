// Long text shown the way a terminal or an editor shows it: a command's output with its ANSI
// colours (parsed by anser), a file with line numbers, a diff. Collapsed to its last (or first)
// lines with a line count, "Show all" and "Copy"; all 20,000 lines of a big output render only
// the rows on screen (@tanstack/react-virtual), so the page stays fast. Plain text renders as
// one text node, so a live output that grows moves nothing already on screen.

import { useVirtualizer } from "@tanstack/react-virtual";
import Anser from "anser";
import { useMemo, useRef, useState, type CSSProperties, type ReactNode } from "react";

/** A run of text with one style. */
export interface Chunk {
  text: string;
  cls?: string;
  style?: CSSProperties;
}

export interface Line {
  /** The line's text, or its styled runs. */
  content: string | Chunk[];
  /** A class for the whole line (a diff's added and removed lines). */
  cls?: string;
  /** Shown before the line (a line number). */
  gutter?: string;
}

/** Lines shown while collapsed. */
export const COLLAPSED_LINES = 15;
/** "Show all" renders every line up to this many; beyond, only the rows on screen. */
const VIRTUAL_FROM = 300;
/** The height of a row of the virtual list; the CSS of `.virtual .row` uses the same. */
const ROW_PX = 18;

/** The xterm 256-colour palette entry `n` (16–255) as CSS. */
function palette(n: number): string {
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `rgb(${v}, ${v}, ${v})`;
  }
  const i = n - 16;
  const c = (x: number) => (x === 0 ? 0 : 55 + x * 40);
  return `rgb(${c(Math.floor(i / 36))}, ${c(Math.floor(i / 6) % 6)}, ${c(i % 6)})`;
}

function colour(name: string | null, truecolor: string | null, side: "fg" | "bg"): Chunk {
  if (name === null) return { text: "" };
  const prop = side === "fg" ? "color" : "backgroundColor";
  if (name === "ansi-truecolor" && truecolor)
    return { text: "", style: { [prop]: `rgb(${truecolor})` } };
  const p = /^ansi-palette-(\d+)$/.exec(name);
  if (p) {
    const n = Number(p[1]);
    // 0–15 are the named colours, themed by the stylesheet.
    if (n < 16) return { text: "", cls: `ansi-${n}-${side}` };
    return { text: "", style: { [prop]: palette(n) } };
  }
  return { text: "", cls: `${name}-${side}` };
}

/** What a terminal keeps of a line that returns to its start (`\r`): the last write. */
function overwritten(line: string): string {
  const l = line.endsWith("\r") ? line.slice(0, -1) : line;
  const cr = l.lastIndexOf("\r");
  return cr < 0 ? l : l.slice(cr + 1);
}

/** A command's output as lines of styled runs; the plain text (for Copy) beside them. */
export function terminalLines(text: string): { lines: Line[]; plain: string } {
  const body = text.endsWith("\n") ? text.slice(0, -1) : text;
  if (body === "") return { lines: [], plain: "" };
  const raw = body.split("\n").map(overwritten);
  if (!body.includes("\x1b"))
    return { lines: raw.map((content) => ({ content })), plain: raw.join("\n") };
  // Parsed as a whole, so a colour set on one line carries on to the next.
  const lines: Line[] = [{ content: [] }];
  const plain: string[] = [""];
  for (const e of Anser.ansiToJson(raw.join("\n"), { use_classes: true, remove_empty: true })) {
    const fg = colour(e.fg, e.fg_truecolor, "fg");
    const bg = colour(e.bg, e.bg_truecolor, "bg");
    const cls = [fg.cls, bg.cls, ...e.decorations.map((d) => `ansi-${d}`)]
      .filter(Boolean)
      .join(" ");
    const style = fg.style || bg.style ? { ...fg.style, ...bg.style } : undefined;
    e.content.split("\n").forEach((part, i) => {
      if (i > 0) {
        lines.push({ content: [] });
        plain.push("");
      }
      if (part === "") return;
      (lines.at(-1)!.content as Chunk[]).push({
        text: part,
        ...(cls && { cls }),
        ...(style && { style }),
      });
      plain[plain.length - 1] += part;
    });
  }
  return { lines, plain: plain.join("\n") };
}

function renderContent(content: Line["content"]): ReactNode {
  if (typeof content === "string") return content;
  return content.map((c, i) =>
    c.cls === undefined && c.style === undefined ? (
      c.text
    ) : (
      <span key={i} className={c.cls} style={c.style}>
        {c.text}
      </span>
    ),
  );
}

/** Every line as its own element (numbers, classes), or, when all are plain, one text node. */
function renderLines(lines: Line[]): ReactNode {
  const plain = lines.every(
    (l) => typeof l.content === "string" && !l.cls && l.gutter === undefined,
  );
  if (plain) return lines.map((l) => l.content as string).join("\n");
  return lines.map((l, i) => (
    <span key={i} className={l.cls ? `ln-row ${l.cls}` : "ln-row"}>
      {l.gutter !== undefined && <span className="gutter">{l.gutter}</span>}
      {renderContent(l.content)}
      {"\n"}
    </span>
  ));
}

function VirtualLines({ lines, className }: { lines: Line[]; className: string }) {
  const box = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count: lines.length,
    getScrollElement: () => box.current,
    estimateSize: () => ROW_PX,
    overscan: 20,
  });
  return (
    <div ref={box} className={`${className} virtual`} tabIndex={0} data-testid="virtual-lines">
      <div style={{ height: v.getTotalSize(), position: "relative" }}>
        {v.getVirtualItems().map((item) => {
          const l = lines[item.index]!;
          return (
            <div
              key={item.key}
              className={l.cls ? `row ${l.cls}` : "row"}
              style={{ transform: `translateY(${item.start}px)` }}
            >
              {l.gutter !== undefined && <span className="gutter">{l.gutter}</span>}
              {renderContent(l.content)}
            </div>
          );
        })}
      </div>
    </div>
  );
}

function CopyButton({ text, hidden }: { text: () => string; hidden: boolean }) {
  const [done, setDone] = useState<"copied" | "failed">();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text());
      setDone("copied");
    } catch {
      setDone("failed");
    }
    setTimeout(() => setDone(undefined), 1500);
  };
  return (
    <button
      type="button"
      className="secondary small copy"
      onClick={() => void copy()}
      disabled={hidden}
      style={hidden ? { visibility: "hidden" } : undefined}
      aria-hidden={hidden}
    >
      {done === "copied" ? "Copied" : done === "failed" ? "Not copied" : "Copy"}
    </button>
  );
}

/**
 * Lines in a box with a label, the line count, "Show all" (when some are hidden) and "Copy".
 * `keep` says which end a collapsed view shows: the tail of an output, the head of a file.
 */
export function LinesView(p: {
  lines: Line[];
  label: string;
  /** The text Copy puts on the clipboard. */
  copy: () => string;
  keep: "tail" | "head";
  /** The box's class: `output` (a terminal), `file`, `diff`. */
  className: string;
  empty?: string;
}) {
  const [all, setAll] = useState(false);
  const n = p.lines.length;
  const hidden = all ? 0 : Math.max(0, n - COLLAPSED_LINES);
  const shown = useMemo(
    () =>
      hidden === 0
        ? p.lines
        : p.keep === "tail"
          ? p.lines.slice(n - COLLAPSED_LINES)
          : p.lines.slice(0, COLLAPSED_LINES),
    [p.lines, p.keep, hidden, n],
  );
  const count = `${n.toLocaleString("en-US")} ${n === 1 ? "line" : "lines"}`;
  return (
    <div className="lines">
      <div className="lines-bar">
        {/* One text node: as the count grows it changes in place. */}
        <span className="lines-label">
          {`${p.label} · ${count}${hidden > 0 ? `, ${p.keep === "tail" ? "last" : "first"} ${COLLAPSED_LINES} shown` : ""}`}
        </span>
        {/* Always there (hidden while not needed), so the bar never changes its layout. */}
        <span className="lines-tools">
          {all && n > COLLAPSED_LINES ? (
            <button type="button" className="secondary small" onClick={() => setAll(false)}>
              Collapse
            </button>
          ) : (
            <button
              type="button"
              className="secondary small"
              onClick={() => setAll(true)}
              disabled={hidden === 0}
              style={hidden === 0 ? { visibility: "hidden" } : undefined}
              aria-hidden={hidden === 0}
            >
              Show all
            </button>
          )}
          <CopyButton text={p.copy} hidden={n === 0} />
        </span>
      </div>
      {all && n >= VIRTUAL_FROM ? (
        <VirtualLines lines={p.lines} className={p.className} />
      ) : (
        <pre className={p.className}>{n === 0 ? (p.empty ?? "") : renderLines(shown)}</pre>
      )}
    </div>
  );
}

/** A command's output: ANSI colours rendered, collapsed to its last lines. */
export function TerminalOutput(p: { text: string; label: string }) {
  const parsed = useMemo(() => terminalLines(p.text), [p.text]);
  return (
    <LinesView
      lines={parsed.lines}
      label={p.label}
      copy={() => parsed.plain}
      keep="tail"
      className="output"
      empty="(no output)"
    />
  );
}
