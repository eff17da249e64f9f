// Hostile chats: the fake model answers each campaign chat with tool calls chosen from the
// chat's seed — NUL bytes and invalid UTF-8 in commands and file content, huge arguments,
// unknown tools, malformed JSON arguments, commands that print /dev/zero or /dev/urandom —
// and the chat must still end `waiting` or `error`, also when it is interrupted mid-turn.

import type { FakeChatRequest, FakeStep, FakeToolCall } from "../support/fake-provider.ts";
import { deriveSeed, Rng } from "../chaos/rng.ts";

export const chatMessage = (k: number) => `fz-chat-${k}: do what the tools say`;

/** The hostile tool calls of one round of chat `k`. */
export function hostileCalls(seed: number, k: number, round: number, dir: string): FakeToolCall[] {
  const rng = new Rng(deriveSeed(seed, "chat", k, round));
  const n = rng.int(1, 3);
  const calls: FakeToolCall[] = [];
  for (let i = 0; i < n; i++) {
    const id = rng.chance(0.2) ? `工具-${k}-${round}-${i}` : `call_${k}_${round}_${i}`;
    const file = `${dir}/chat-${k}-${i}.txt`;
    const kind = rng.weighted({
      nul_output: 3,
      zero: 2,
      urandom: 2,
      nul_command: 2,
      surrogate_command: 1,
      huge_command: 1,
      write_nul: 2,
      write_surrogate: 1,
      read_proc_mem: 1,
      read_dev: 1,
      unknown_tool: 1,
      malformed_args: 2,
      wrong_args: 1,
      background: 1,
      edit_bad: 1,
      process_calls: 1,
    });
    const call = (name: string, args: unknown): FakeToolCall => ({ id, name, args });
    switch (kind) {
      case "nul_output":
        calls.push(
          call("execute", {
            command: rng.pick([
              `printf "a\\000b"`,
              `printf 'x\\0y\\0'; echo`,
              `printf '\\377\\376\\000'`,
            ]),
          }),
        );
        break;
      case "zero":
        calls.push(
          call("execute", { command: `head -c ${rng.pick(["1M", "100k", "5M"])} /dev/zero` }),
        );
        break;
      case "urandom":
        calls.push(call("execute", { command: `head -c ${rng.pick(["1M", "64k"])} /dev/urandom` }));
        break;
      case "nul_command":
        calls.push(
          call("execute", {
            command: "echo a\u0000b",
            ...(rng.chance(0.3) && { workdir: "/tmp\u0000x" }),
          }),
        );
        break;
      case "surrogate_command":
        calls.push(call("execute", { command: "echo \ud800 \udfff" }));
        break;
      case "huge_command":
        calls.push(
          call("execute", { command: `echo ${"h".repeat(rng.pick([100_000, 600_000]))} | wc -c` }),
        );
        break;
      case "write_nul":
        calls.push(call("write_file", { path: file, content: "a\u0000b\n" }));
        break;
      case "write_surrogate":
        calls.push(
          call("write_file", {
            path: file,
            content: "a\ud800b\n" + "w".repeat(rng.pick([1, 200_000])),
          }),
        );
        break;
      case "read_proc_mem":
        calls.push(call("read_file", { path: "/proc/self/mem" }));
        break;
      case "read_dev":
        calls.push(
          call("read_file", {
            path: rng.pick(["/dev/zero", "/dev/urandom", "/proc/self/status", file]),
          }),
        );
        break;
      case "unknown_tool":
        calls.push(
          call(rng.pick(["rm_rf", "", "execute ", "__proto__", "工具"]), { command: "true" }),
        );
        break;
      case "malformed_args":
        calls.push(
          call(
            rng.pick(["execute", "write_file", "edit_files"]),
            rng.pick([
              '{"command": "ec',
              "not json",
              "",
              "[1,2",
              '{"command":"echo \\ud800"}',
              "null",
              '{"a":',
            ]),
          ),
        );
        break;
      case "wrong_args":
        calls.push(
          call(
            "execute",
            rng.pick([
              { command: 5 },
              { command: "" },
              { cmd: "ls" },
              { command: ["ls"] },
              { command: "true", timeout: "forever" },
            ]),
          ),
        );
        break;
      case "background":
        calls.push(
          call("execute", {
            command: `printf '\\000'; sleep ${rng.int(1, 3)}; head -c 10k /dev/urandom`,
            run_in_background: true,
          }),
        );
        break;
      case "edit_bad":
        calls.push(
          call("edit_files", {
            files: [{ path: file, edits: [{ old_text: "a\u0000", new_text: "\ud800" }] }],
          }),
        );
        break;
      case "process_calls":
        calls.push(
          call(
            rng.pick(["process_list", "process_output", "process_signal"]),
            rng.pick([{}, { process_id: "nope" }, { process_id: "x", signal: "kill" }]),
          ),
        );
        break;
    }
  }
  return calls;
}

/** The fake model's answer for a campaign chat: hostile rounds, then a text. */
export function hostileStep(
  seed: number,
  dir: string,
  request: FakeChatRequest,
): FakeStep | undefined {
  const first = request.messages.find((m) => m.role === "user");
  const text =
    typeof first?.content === "string" ? first.content : JSON.stringify(first?.content ?? "");
  const m = /fz-chat-(\d+)/.exec(text);
  if (!m) return undefined;
  const k = Number(m[1]);
  const round = request.messages.filter((x) => x.role === "assistant").length;
  const rounds = 1 + (deriveSeed(seed, "rounds", k) % 3);
  if (round >= rounds) return { text: rng0(seed, k) ? "done \u0000 with a NUL" : "done" };
  return {
    ...(round === 0 && { text: "running" }),
    toolCalls: hostileCalls(seed, k, round, dir),
  };
}

function rng0(seed: number, k: number): boolean {
  return deriveSeed(seed, "text", k) % 4 === 0;
}
