// What a later read of a command's output holds that the user has not seen yet. Reads of one
// output are not always extensions of each other: the agent keeps only the first and the last
// 16 KiB of it (CONTRACT.md 7), so once a command printed more, each read is the head, a marker
// and a tail that moves on; and a result's output may be cut again to fit the model's context
// (chatd/tools/truncate.ts). What was shown may then end in a part that is gone.

/** The end of what was shown that is looked for in a later read, to find where it resumes. */
const ANCHOR_CHARS = 256;

/**
 * What `now` (a later read of an output) adds to `shown` (what was shown of it): its growth
 * when it extends `shown`; else what follows the last of `shown` that is still in it; else,
 * when nothing shown near the end is left, everything after the start they share (the marker
 * of what was left out, and the tail).
 */
export function unseenOutput(shown: string, now: string): string {
  if (now.startsWith(shown)) return now.slice(shown.length);
  const anchor = shown.slice(-ANCHOR_CHARS);
  const at = now.lastIndexOf(anchor);
  if (at >= 0) return now.slice(at + anchor.length);
  let shared = 0;
  while (shared < now.length && now[shared] === shown[shared]) shared++;
  return now.slice(shared);
}
