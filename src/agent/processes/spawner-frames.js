// The frames between the agent and its spawner (spawner.c, spawner-main.js): on the spawner's
// stdin and stdout, each `u32 length of what follows (little-endian) | u8 type | u32 handle |
// payload`. spawner.c documents the types. Plain JavaScript, for spawner-main.js.

/** The bytes of one frame. */
export function encodeFrame(type, handle, payload) {
  const n = payload === undefined ? 0 : payload.length;
  const b = Buffer.allocUnsafe(9 + n);
  b.writeUInt32LE(5 + n, 0);
  b[4] = type.charCodeAt(0);
  b.writeUInt32LE(handle, 5);
  if (n > 0) b.set(payload, 9);
  return b;
}

/** A byte stream that is not frames: its writer is broken. */
export class FrameError extends Error {}

/** Collects a byte stream's chunks and hands on each complete frame. */
export class FrameReader {
  #pending = Buffer.alloc(0);

  /** Calls `onFrame(type, handle, payload)` for every frame `chunk` completes, in order. */
  push(chunk, onFrame) {
    let buf = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    while (buf.length >= 4) {
      const len = buf.readUInt32LE(0);
      if (len < 5) throw new FrameError(`bad frame: ${len} bytes`);
      if (buf.length < 4 + len) break;
      onFrame(String.fromCharCode(buf[4]), buf.readUInt32LE(5), buf.subarray(9, 4 + len));
      buf = buf.subarray(4 + len);
    }
    this.#pending = buf;
  }
}

/** "K=V\0" for each variable. */
export function encodeEnv(env) {
  let s = "";
  for (const [k, v] of Object.entries(env)) if (v !== undefined) s += `${k}=${v}\0`;
  return s;
}

/** The strings of a run of NUL-terminated ones. */
export function splitNul(bytes) {
  const s = bytes.toString();
  return s.length === 0 ? [] : s.slice(0, s.endsWith("\0") ? -1 : undefined).split("\0");
}
