// The rule both caches of rarely changed rows follow for an entry in use (chatd/config-cache.ts,
// api/token-cache.ts): it is read again behind the one served once half its age bound old, so
// no request waits for the read of a row the replica holds.

/** A held entry: read at `at`; `refreshing` while a read behind it is in flight. */
export interface HeldEntry<T> {
  at: number;
  value: Promise<T>;
  refreshing?: boolean;
}

/**
 * Once `entry` is more than half of `maxAgeMs` old at `now`, it is read again behind the one
 * served (`load`, one read at a time), and `keep` is given the new read once it succeeds; a
 * failed one is tried again by the next use. The caller serves `entry` only while it is at most
 * `maxAgeMs` old.
 */
export function readBehind<T>(
  entry: HeldEntry<T>,
  now: number,
  maxAgeMs: number,
  load: () => Promise<T>,
  keep: (value: Promise<T>, resolved: T) => void,
): void {
  if (now - entry.at <= maxAgeMs / 2 || entry.refreshing) return;
  entry.refreshing = true;
  const value = load();
  value.then(
    (resolved) => keep(value, resolved),
    () => (entry.refreshing = false),
  );
}
