// The spinner of `tether chat`: only on a terminal that has a size (a pty without one, as under
// `script`, reports 0×0, and a spinner there writes cursor moves forever), never in a pipe or
// under TERM=dumb, and never reading stdin (ora's default puts the terminal in raw mode, and then
// Ctrl-C sends no SIGINT). It starts only at the start of a line, so stopping it (which clears
// its line) never erases text. Whether it spins is decided here alone: ora's own check also
// turns it into one printed "- label" line per start whenever a `CI` variable is set.

import ora, { type Ora } from "ora";

/** Whether `stream` can show a spinner. */
export function spinnerAllowed(stream: NodeJS.WriteStream, env = process.env): boolean {
  return (
    stream.isTTY === true &&
    (stream.columns ?? 0) > 0 &&
    (stream.rows ?? 0) > 0 &&
    env.TERM !== "dumb"
  );
}

/**
 * The terminal's text and its spinner. Everything printed goes through `write`, which stops the
 * spinner first and remembers whether the cursor is at the start of a line.
 */
export class Screen {
  readonly #spinner: Ora | undefined;
  readonly #tty: { out: boolean; err: boolean };
  /** Whether each stream's last text ended its line. */
  readonly #lineStart = { out: true, err: true };
  #label: string | undefined;

  constructor(
    private readonly stdout: NodeJS.WriteStream = process.stdout,
    private readonly stderr: NodeJS.WriteStream = process.stderr,
  ) {
    this.#tty = { out: stdout.isTTY === true, err: stderr.isTTY === true };
    this.#spinner = spinnerAllowed(stderr)
      ? ora({ stream: stderr, discardStdin: false, hideCursor: false, isEnabled: true })
      : undefined;
  }

  /** Whether stdout is a terminal (colour and escape sequences may go there). */
  get stdoutIsTerminal(): boolean {
    return this.#tty.out;
  }

  write(to: "out" | "err", text: string): void {
    if (text === "") return;
    this.#pause();
    (to === "out" ? this.stdout : this.stderr).write(text);
    this.#lineStart[to] = text.endsWith("\n");
    this.#resume();
  }

  /** Resets the terminal's colours and text attributes (SGR 0), where stdout is a terminal. */
  resetStyle(): void {
    if (this.#tty.out) this.stdout.write("\x1b[0m");
  }

  /** Ends the current line if something is on it. */
  newline(): void {
    if (!this.#lineStart.out) this.write("out", "\n");
  }

  /** Shows `label` spinning (at the next line start), or nothing with undefined. */
  busy(label: string | undefined): void {
    this.#label = label;
    if (label === undefined) this.#pause();
    else this.#resume();
  }

  /** Clears the spinner's line, if it spins (ora's stop moves the cursor to column 0 always). */
  #pause(): void {
    if (this.#spinner?.isSpinning) this.#spinner.stop();
  }

  #resume(): void {
    if (!this.#spinner || this.#label === undefined) return;
    // The spinner shares a line only with what goes to the terminal: it waits for its end.
    if ((this.#tty.out && !this.#lineStart.out) || !this.#lineStart.err) return;
    this.#spinner.text = this.#label;
    if (!this.#spinner.isSpinning) this.#spinner.start();
  }
}
