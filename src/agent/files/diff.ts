// A small unified line diff for edit-files' include_diff. Common leading and trailing lines are
// skipped, the rest is aligned by longest common subsequence (or shown as one replacement when
// that would be too costly), and changes are shown with 3 lines of context, like `diff -u`.

const CONTEXT_LINES = 3;

/** Above this many cells (old lines × new lines) the changed middle is not aligned. */
const MAX_ALIGN_CELLS = 4_000_000;

type Kind = " " | "-" | "+";

interface Op {
  kind: Kind;
  /** The line with its line ending; the last line of a file may have none. */
  line: string;
}

/** The unified diff from `before` to `after`, both the contents of `path`; "" when equal. */
export function unifiedDiff(path: string, before: string, after: string): string {
  if (before === after) return "";
  const ops = diffLines(lines(before), lines(after));
  let out = `--- ${path}\n+++ ${path}\n`;
  for (const [from, to] of hunkRanges(ops)) out += hunk(ops, from, to);
  return out;
}

function lines(text: string): string[] {
  return text === "" ? [] : text.split(/(?<=\n)/);
}

function diffLines(a: string[], b: string[]): Op[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  ) {
    tail++;
  }
  const same = (line: string): Op => ({ kind: " ", line });
  return [
    ...a.slice(0, head).map(same),
    ...alignMiddle(a.slice(head, a.length - tail), b.slice(head, b.length - tail)),
    ...a.slice(a.length - tail).map(same),
  ];
}

/** The ops turning `a` into `b` by longest common subsequence; deletions before insertions. */
function alignMiddle(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  if (n === 0 || m === 0 || n * m > MAX_ALIGN_CELLS) {
    return [
      ...a.map((line): Op => ({ kind: "-", line })),
      ...b.map((line): Op => ({ kind: "+", line })),
    ];
  }
  // common[i * (m + 1) + j] = length of the longest common subsequence of a[i..] and b[j..].
  const width = m + 1;
  const common = new Uint32Array((n + 1) * width);
  const at = (i: number, j: number) => common[i * width + j] ?? 0;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      common[i * width + j] =
        a[i] === b[j] ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
    }
  }
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      ops.push({ kind: " ", line: a[i++] ?? "" });
      j++;
    } else if (j >= m || (i < n && at(i + 1, j) >= at(i, j + 1))) {
      ops.push({ kind: "-", line: a[i++] ?? "" });
    } else {
      ops.push({ kind: "+", line: b[j++] ?? "" });
    }
  }
  return ops;
}

/** [from, to) op ranges of the hunks: each change with its context, touching ranges merged. */
function hunkRanges(ops: Op[]): [number, number][] {
  const shown = new Array<boolean>(ops.length).fill(false);
  ops.forEach((op, i) => {
    if (op.kind === " ") return;
    const end = Math.min(ops.length - 1, i + CONTEXT_LINES);
    for (let k = Math.max(0, i - CONTEXT_LINES); k <= end; k++) shown[k] = true;
  });
  const ranges: [number, number][] = [];
  for (let i = 0; i < ops.length; i++) {
    if (!shown[i]) continue;
    const from = i;
    while (i < ops.length && shown[i]) i++;
    ranges.push([from, i]);
  }
  return ranges;
}

function hunk(ops: Op[], from: number, to: number): string {
  // Line numbers: how many old and new lines come before the hunk.
  let oldBefore = 0;
  let newBefore = 0;
  for (const op of ops.slice(0, from)) {
    if (op.kind !== "+") oldBefore++;
    if (op.kind !== "-") newBefore++;
  }
  const body = ops.slice(from, to);
  const oldCount = body.filter((op) => op.kind !== "+").length;
  const newCount = body.filter((op) => op.kind !== "-").length;
  // As in `diff -u`, an empty side names the line before it.
  const oldStart = oldCount === 0 ? oldBefore : oldBefore + 1;
  const newStart = newCount === 0 ? newBefore : newBefore + 1;
  let out = `@@ -${oldStart},${oldCount} +${newStart},${newCount} @@\n`;
  for (const op of body) {
    out += op.kind + op.line;
    if (!op.line.endsWith("\n")) out += "\n\\ No newline at end of file\n";
  }
  return out;
}
