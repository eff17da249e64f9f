// Cutting UTF-8 bytes without splitting a character, for what either side caps by bytes (the
// agent's line and context caps, chatd's tool result budget).

/**
 * `at` moved back to the start of the character it falls in: a cut of `bytes` at the answer
 * never splits a UTF-8 sequence (a byte 10xxxxxx continues one). `at` at or past the end
 * stays.
 */
export function utf8Floor(bytes: Uint8Array, at: number): number {
  while (at > 0 && at < bytes.length && (bytes[at]! & 0xc0) === 0x80) at--;
  return at;
}

/** `at` moved forward to the start of the next character: where a tail kept from `at` starts. */
export function utf8Ceil(bytes: Uint8Array, at: number): number {
  while (at < bytes.length && (bytes[at]! & 0xc0) === 0x80) at++;
  return at;
}
