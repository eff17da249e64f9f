// Types of spawner-frames.js.

export function encodeFrame(type: string, handle: number, payload?: Uint8Array): Buffer;

export class FrameError extends Error {}

export class FrameReader {
  push(chunk: Buffer, onFrame: (type: string, handle: number, payload: Buffer) => void): void;
}

export function encodeEnv(env: Record<string, string | undefined>): string;

export function splitNul(bytes: Buffer): string[];
