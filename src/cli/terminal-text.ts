// Text `tether chat` prints but did not write — a model's words, a command as the model made it,
// the command's output, a file's diff, an error a provider or an agent gave — made safe for a
// terminal. Any of it may hold escape sequences: a file, a web page or a tool result the model
// read can make it print them, and a terminal acts on them (a window title, the clipboard with
// OSC 52, cursor moves that rewrite the lines above, such as the line showing which command ran).
// A command's output keeps its colours on a terminal (SGR sequences) and loses every other
// sequence and control character but newline, tab and carriage return; all other text shows its
// control characters as `\xNN`, so what is shown is what the model sent.

/**
 * An escape sequence (CSI, OSC and the other string sequences, or a two-character escape), in
 * its 7-bit or C1 form, or a lone control character. Group 1: an SGR sequence (colours).
 */
const SEQUENCE =
  // eslint-disable-next-line no-control-regex -- control characters are what these match
  /(\x1b\[[0-9;:]*m)|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -/]*[0-~]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/g;

/**
 * An escape sequence begun at the end of a text and not ended there: ESC alone, a CSI without
 * its final byte, a string sequence (OSC, DCS, …) without its terminator or with half of it.
 */
const UNFINISHED =
  // eslint-disable-next-line no-control-regex -- as above
  /(?:\x1b(?:\[[0-?]*[ -/]*|[\]PX^_][^\x07\x1b\x9c]*\x1b?|[ -/]*)?|\x9b[0-?]*[ -/]*|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*\x1b?)$/;

/** The longest unfinished sequence waited for: a longer one is dropped as it stands. */
const UNFINISHED_MAX = 4096;

/** Control characters: C0 but newline, tab and the carriage return of a CRLF; DEL; C1. */
// eslint-disable-next-line no-control-regex -- as above
const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)/g;

/** `text` with each control character (CONTROL) written as `\xNN`. */
export function visible(text: string): string {
  return text.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/**
 * A command's output as a terminal (`terminal`) or a pipe gets it: its colours kept on a
 * terminal, every other escape sequence and control character dropped, but newline, tab and
 * carriage return. A sequence cut at the end of `text` is dropped: splitUnfinished keeps it
 * for the output's next chunk.
 */
export function commandOutput(text: string, terminal: boolean): string {
  return text.replace(SEQUENCE, (_seq: string, sgr: string | undefined) =>
    terminal && sgr !== undefined ? sgr : "",
  );
}

/**
 * A chunk of a command's output split before an escape sequence that begins in it and has not
 * ended (UNFINISHED): the text to show now, and the sequence, to go before the next chunk. A
 * process's writes, and the agent's reads of them, can end in the middle of a sequence.
 */
export function splitUnfinished(text: string): [now: string, held: string] {
  const m = UNFINISHED.exec(text);
  if (!m || text.length - m.index > UNFINISHED_MAX) return [text, ""];
  return [text.slice(0, m.index), text.slice(m.index)];
}
