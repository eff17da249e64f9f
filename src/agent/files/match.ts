// How one edit finds its old_text (CONTRACT.md 7, edit-files), in three passes tried in order:
// the exact text; else whole lines ignoring trailing whitespace; else whole lines ignoring
// leading and trailing whitespace. A pass that finds more than one place is ambiguous (unless
// replace_all) and no later pass is tried, so an edit never lands in a place the caller did not mean.

/** One search and replace, as the request carries it. */
export interface Edit {
  old_text: string;
  new_text: string;
  /** Replace every match instead of requiring exactly one. */
  replace_all?: boolean | undefined;
}

export type MatchPass = "exact" | "trailing_whitespace" | "surrounding_whitespace";

export type EditOutcome =
  | { status: "applied"; text: string; pass: MatchPass }
  | { status: "not_found" }
  | { status: "ambiguous"; pass: MatchPass; matches: number };

/** `text` with `edit` applied; `edit.old_text` must not be empty. */
export function applyEdit(text: string, edit: Edit): EditOutcome {
  const exact = occurrences(text, edit.old_text);
  if (exact.length > 0) {
    return decide("exact", exact, edit, (starts) =>
      replaceSpans(text, starts, edit.old_text.length, edit.new_text),
    );
  }
  const lines = splitKeepingEol(text);
  const wanted = splitKeepingEol(edit.old_text).map((line) => line.text);
  // Old text of only blank lines would match any blank line; it must match exactly or not at all.
  if (wanted.every((line) => line.trim() === "")) return { status: "not_found" };
  for (const [pass, normalize] of LINE_PASSES) {
    const starts = lineMatches(lines, wanted, normalize);
    if (starts.length > 0) {
      return decide(pass, starts, edit, (chosen) =>
        replaceLines(lines, chosen, wanted.length, edit.new_text),
      );
    }
  }
  return { status: "not_found" };
}

const LINE_PASSES: readonly (readonly [MatchPass, (line: string) => string])[] = [
  ["trailing_whitespace", (line) => line.trimEnd()],
  ["surrounding_whitespace", (line) => line.trim()],
];

/** Ambiguous when more than one start was found without replace_all; else replaces. */
function decide(
  pass: MatchPass,
  starts: number[],
  edit: Edit,
  replace: (chosen: number[]) => string,
): EditOutcome {
  if (starts.length > 1 && edit.replace_all !== true) {
    return { status: "ambiguous", pass, matches: starts.length };
  }
  return { status: "applied", text: replace(starts), pass };
}

/** Every index where `needle` starts in `haystack`, overlapping ones included. */
function occurrences(haystack: string, needle: string): number[] {
  const starts: number[] = [];
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + 1)) {
    starts.push(at);
  }
  return starts;
}

/** The starts that do not overlap an earlier chosen one, each `length` long. */
function nonOverlapping(starts: number[], length: number): number[] {
  const chosen: number[] = [];
  let free = 0;
  for (const start of starts) {
    if (start < free) continue;
    chosen.push(start);
    free = start + length;
  }
  return chosen;
}

function replaceSpans(text: string, starts: number[], length: number, replacement: string) {
  let out = "";
  let copied = 0;
  for (const start of nonOverlapping(starts, length)) {
    out += text.slice(copied, start) + replacement;
    copied = start + length;
  }
  return out + text.slice(copied);
}

/** A line of a file: its text without the line ending, and the ending ("\n", "\r\n" or ""). */
interface Line {
  text: string;
  eol: string;
}

function splitKeepingEol(text: string): Line[] {
  const lines: Line[] = [];
  let start = 0;
  while (start < text.length) {
    const nl = text.indexOf("\n", start);
    if (nl === -1) {
      lines.push({ text: text.slice(start), eol: "" });
      break;
    }
    const crlf = nl > start && text[nl - 1] === "\r";
    lines.push({ text: text.slice(start, crlf ? nl - 1 : nl), eol: crlf ? "\r\n" : "\n" });
    start = nl + 1;
  }
  return lines;
}

/** Every line index where `wanted` matches whole lines once both sides are normalized. */
function lineMatches(lines: Line[], wanted: string[], normalize: (line: string) => string) {
  const target = wanted.map(normalize);
  const starts: number[] = [];
  for (let i = 0; i + target.length <= lines.length; i++) {
    if (target.every((line, j) => normalize(lines[i + j]?.text ?? "") === line)) starts.push(i);
  }
  return starts;
}

/**
 * The file with the `count` lines at each chosen start replaced by the lines of `newText`.
 * New lines end with the file's usual line ending; the last keeps the ending of the last line
 * it replaces, so a file without a final newline still has none.
 */
function replaceLines(lines: Line[], starts: number[], count: number, newText: string): string {
  const eol = usualEol(lines);
  const added = splitKeepingEol(newText).map((line) => line.text);
  const out: Line[] = [];
  let copied = 0;
  for (const start of nonOverlapping(starts, count)) {
    out.push(...lines.slice(copied, start));
    const lastEol = lines[start + count - 1]?.eol ?? eol;
    added.forEach((text, k) => out.push({ text, eol: k === added.length - 1 ? lastEol : eol }));
    copied = start + count;
  }
  out.push(...lines.slice(copied));
  return out.map((line) => line.text + line.eol).join("");
}

/** "\r\n" when most line endings of the file are "\r\n", else "\n". */
function usualEol(lines: Line[]): string {
  let crlf = 0;
  let lf = 0;
  for (const line of lines) {
    if (line.eol === "\r\n") crlf++;
    else if (line.eol === "\n") lf++;
  }
  return crlf > lf ? "\r\n" : "\n";
}
