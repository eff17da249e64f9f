// What the file tools did, as an editor shows it: the lines read_file read, with their numbers;
// the diff of an edit (the agent's unified diff when it sent one, else one made from the edits by
// the `diff` package) and of a write (the new content, every line added).

import { parsePatch, structuredPatch, type StructuredPatch } from "diff";
import { useMemo } from "react";
import { LinesView, type Line } from "./lines.tsx";

/** read_file's `"<n>\t<line>"` lines, number and text apart. */
export function FileLines(p: { content: string; label: string }) {
  const lines = useMemo<Line[]>(
    () =>
      p.content === ""
        ? []
        : p.content.split("\n").map((l) => {
            const tab = l.indexOf("\t");
            return tab < 0
              ? { content: l }
              : { gutter: l.slice(0, tab), content: l.slice(tab + 1) };
          }),
    [p.content],
  );
  const text = () => lines.map((l) => l.content as string).join("\n");
  return (
    <LinesView
      lines={lines}
      label={p.label}
      copy={text}
      keep="head"
      className="file"
      empty="(empty)"
    />
  );
}

/** A patch's hunks as lines: `@@` headers, then each line with its old and new number. */
function patchLines(patches: StructuredPatch[]): Line[] {
  const out: Line[] = [];
  for (const patch of patches) {
    if (patches.length > 1)
      out.push({ content: patch.newFileName ?? patch.oldFileName ?? "", cls: "d-file" });
    for (const h of patch.hunks) {
      out.push({
        content: `@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`,
        cls: "d-hunk",
      });
      let oldN = h.oldStart;
      let newN = h.newStart;
      for (const l of h.lines) {
        const mark = l[0];
        if (mark === "\\") continue; // "\ No newline at end of file"
        const cls = mark === "+" ? "d-add" : mark === "-" ? "d-del" : undefined;
        const gutter =
          mark === "+" ? `${newN++}` : mark === "-" ? `${oldN++}` : `${(oldN++, newN++)}`;
        out.push({ content: l, gutter, ...(cls && { cls }) });
      }
    }
  }
  return out;
}

function DiffLines(p: { patches: StructuredPatch[]; label: string }) {
  const lines = useMemo(() => patchLines(p.patches), [p.patches]);
  const added = lines.filter((l) => l.cls === "d-add").length;
  const removed = lines.filter((l) => l.cls === "d-del").length;
  return (
    <LinesView
      lines={lines}
      label={`${p.label} (+${added} −${removed})`}
      copy={() => lines.map((l) => l.content as string).join("\n")}
      keep="head"
      className="diff"
      empty="(no change)"
    />
  );
}

interface EditArgs {
  files?: { path?: string; edits?: { old_text?: string; new_text?: string }[] }[];
}

/**
 * edit_files' diff: the agent's own when its result has one (the real change to each file),
 * else each edit's old text against its new text, as the model asked.
 */
export function EditDiff(p: { args: unknown; result?: Record<string, unknown> }) {
  const patches = useMemo(() => {
    const files = p.result?.files;
    if (
      Array.isArray(files) &&
      files.every((f) => typeof (f as { diff?: unknown }).diff === "string")
    )
      return (files as { diff: string }[]).flatMap((f) => parsePatch(f.diff));
    return ((p.args as EditArgs).files ?? []).flatMap((f) =>
      (f.edits ?? []).map((e) =>
        structuredPatch(f.path ?? "", f.path ?? "", e.old_text ?? "", e.new_text ?? "", "", "", {
          context: 3,
        }),
      ),
    );
  }, [p.args, p.result]);
  return <DiffLines patches={patches} label="Diff" />;
}

/** write_file's content as a diff from nothing: the file the model wrote. */
export function WriteDiff(p: { path: string; content: string }) {
  const patches = useMemo(
    () => [structuredPatch(p.path, p.path, "", p.content, "", "", { context: 0 })],
    [p.path, p.content],
  );
  return <DiffLines patches={patches} label="New content" />;
}
