// Scrubs secrets out of a stream of text before it is stored: every occurrence of a secret
// becomes a marker, even when the stream splits it across chunks, because the scrubber holds
// back the end of each chunk that could still be the start of a secret.

export const SCRUBBED = "[redacted]";

export class Scrubber {
  readonly #secrets: string[];
  readonly #holdBack: number;
  #pending = "";

  /** Empty secrets are ignored; the longest are replaced first. */
  constructor(secrets: readonly string[]) {
    this.#secrets = [...new Set(secrets.filter((s) => s !== ""))].sort(
      (a, b) => b.length - a.length,
    );
    this.#holdBack = Math.max(0, ...this.#secrets.map((s) => s.length - 1));
  }

  /** Takes the next chunk; answers the text now safe to pass on. */
  push(chunk: string): string {
    const text = this.#replace(this.#pending + chunk);
    // Keep back what could be the beginning of a secret cut off by the chunk's end.
    let keep = 0;
    for (let n = Math.min(this.#holdBack, text.length); n > 0; n--) {
      const tail = text.slice(text.length - n);
      if (this.#secrets.some((s) => s.startsWith(tail))) {
        keep = n;
        break;
      }
    }
    this.#pending = text.slice(text.length - keep);
    return text.slice(0, text.length - keep);
  }

  /** The end of the stream: whatever was held back (it holds no whole secret). */
  flush(): string {
    const rest = this.#pending;
    this.#pending = "";
    return rest;
  }

  #replace(text: string): string {
    let out = text;
    for (const s of this.#secrets) out = out.split(s).join(SCRUBBED);
    return out;
  }
}
