// What a command prints reaches the model as plain text. Commands run with NO_COLOR=1 and
// TERM=dumb, so well-behaved programs print no colour at all (a command that wants it sets its
// own, e.g. `FORCE_COLOR=1 npm test`: inline assignments win); the escape sequences that remain
// are stripped from every output a result carries. The web UI reads a running command's raw
// output from the agent and renders its colours; the model and the stored result never see them.

import { stripVTControlCharacters } from "node:util";

/** Added to the environment of every command the execute tool starts. */
export const PLAIN_OUTPUT_ENV: Readonly<Record<string, string>> = { NO_COLOR: "1", TERM: "dumb" };

/** A command's output without terminal escape sequences (colours, cursor moves). */
export function plainOutput(output: string): string {
  return stripVTControlCharacters(output);
}
