// A turn as JSON lines on stdout, for scripts (`tether chat --json`): `{"event":"chat","data":
// {"id"}}` first, then every stream event as it comes (`message`, `part`, `status`, `error`:
// the shapes of API.md), `{"event":"output","data":{"tool_call_id","text"}}` as a running
// command prints, and `{"event":"end","data":{"chat_id","status","last_error"?}}` last.

import type { ChatEvent } from "./chat-stream.ts";
import type { ChatOutput } from "./chat-turn.ts";

export class JsonOutput implements ChatOutput {
  constructor(private readonly stdout: NodeJS.WritableStream = process.stdout) {}

  line(event: string, data: unknown): void {
    this.stdout.write(`${JSON.stringify({ event, data })}\n`);
  }

  event(e: ChatEvent): void {
    this.line(e.event, e.data);
  }

  output(toolCallId: string, text: string): void {
    this.line("output", { tool_call_id: toolCallId, text });
  }
}
