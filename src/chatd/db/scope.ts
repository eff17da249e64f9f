// Marks the async work running inside `transaction(fn)`, so that a call on the Database itself
// from there fails at once with a clear message. On PGlite's single connection such a call would
// wait for the transaction that waits for it, forever; on Postgres it would run outside the
// transaction. Both drivers refuse it, alike.
//
// The mark is an AsyncLocalStorage, which on Node 20 hooks every promise the process makes:
// about 8 % of a replica's CPU under bench:load. It is a tripwire for a programming error, so it
// is set where such errors are found: under the test suite (VITEST, which the processes tests
// start inherit) and with TETHER_DEBUG=1. Elsewhere both functions do nothing.

import { AsyncLocalStorage } from "node:async_hooks";

interface Scope {
  readonly owner: object;
  open: boolean;
  readonly parent: Scope | undefined;
}

const current =
  process.env.VITEST !== undefined || process.env.TETHER_DEBUG === "1"
    ? new AsyncLocalStorage<Scope>()
    : undefined;

/** Runs `fn` as the body of a transaction of `owner`; the mark ends when `fn` settles. */
export async function inTransactionScope<T>(owner: object, fn: () => Promise<T>): Promise<T> {
  if (!current) return fn();
  const scope: Scope = { owner, open: true, parent: current.getStore() };
  try {
    return await current.run(scope, fn);
  } finally {
    scope.open = false;
  }
}

/** Throws when called from inside an open transaction of `owner` (where the mark is set). */
export function assertNotInTransaction(owner: object, method: string): void {
  for (let s = current?.getStore(); s; s = s.parent) {
    if (s.open && s.owner === owner) {
      throw new Error(
        `db.${method}() was called inside db.transaction(): use the tx argument for queries, and call db.${method}() after the transaction.`,
      );
    }
  }
}
