import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { HumanOutput } from "./chat-human.ts";
import { Screen } from "./chat-spinner.ts";
import { commandOutput, splitUnfinished, visible } from "./terminal-text.ts";

const ESC = "\x1b";
/** Sequences a terminal acts on that a command's output must not get to it. */
const HOSTILE = [
  `${ESC}]52;c;cHduZWQ=\x07`, // OSC 52: write the clipboard
  `${ESC}]0;title${ESC}\\`, // OSC 0 ended by ST: the window title
  `${ESC}]8;;https://evil.example/\x07`, // OSC 8: a hyperlink
  `${ESC}[2A`, // cursor up: rewrite the lines above
  `${ESC}[2J`, // erase the screen
  `${ESC}[1;1H`, // cursor home
  `${ESC}P+q544e${ESC}\\`, // DCS: ask the terminal for a capability (it answers on stdin)
  `${ESC}c`, // full reset
  `${ESC}7`, // save the cursor
  "\x9b2A", // C1 CSI: cursor up
  "\x9d0;title\x9c", // C1 OSC
];

describe("terminal text", () => {
  it("command output keeps its colours on a terminal and no other sequence or control", () => {
    for (const seq of HOSTILE) {
      const out = commandOutput(`a${seq}b\x1b[31mred\x1b[0m\x07\x08\x00c\td\r\ne\rf\n`, true);
      expect(out, JSON.stringify(seq)).toBe("ab\x1b[31mred\x1b[0mc\td\r\ne\rf\n");
    }
    // An OSC left open swallows what follows it in the chunk, as a terminal would.
    expect(commandOutput(`a${ESC}]0;never ended\nb`, true)).toBe("a");
    // A lone escape, or a sequence cut at the chunk's end, loses its escape character here:
    // splitUnfinished (below) keeps such a sequence for the next chunk.
    expect(commandOutput(`a${ESC}`, true)).toBe("a");
    expect(commandOutput(`a${ESC}[3`, true)).toBe("a3");
  });

  it("a sequence cut at a chunk's end waits for the next chunk", () => {
    for (const cut of [
      ESC,
      `${ESC}[`,
      `${ESC}[1;3`,
      `${ESC}]0;ti`,
      `${ESC}]0;title${ESC}`,
      "\x9b2",
      `${ESC}(`,
    ])
      expect(splitUnfinished(`ab${cut}`), JSON.stringify(cut)).toEqual(["ab", cut]);
    // Ended sequences, and text after them, are not held.
    for (const done of [
      `${ESC}[31m`,
      `${ESC}]0;t\x07`,
      `${ESC}]0;t${ESC}\\`,
      `${ESC}c`,
      `${ESC}[2Ax`,
    ])
      expect(splitUnfinished(`ab${done}`), JSON.stringify(done)).toEqual([`ab${done}`, ""]);
    // A string sequence left open for longer than 4 KB is not waited for.
    const long = `${ESC}]0;${"x".repeat(5000)}`;
    expect(splitUnfinished(`ab${long}`)).toEqual([`ab${long}`, ""]);
  });

  it("command output to a pipe keeps no sequence at all", () => {
    expect(commandOutput(`${ESC}[1;31mred${ESC}[0m ${HOSTILE.join(" ")} end\n`, false)).toBe(
      "red " + " ".repeat(HOSTILE.length - 1) + " end\n",
    );
  });

  it("other text shows its control characters as \\xNN, keeping newline, tab and CRLF", () => {
    expect(visible(`rm -rf ~ #${ESC}[2K${ESC}[1A\r$ ls\x9b\x7f`)).toBe(
      "rm -rf ~ #\\x1b[2K\\x1b[1A\\x0d$ ls\\x9b\\x7f",
    );
    expect(visible("a\tb\r\nc\n")).toBe("a\tb\r\nc\n");
  });

  it("a chat on a terminal: colours reset before the client's own lines, the rest made visible", () => {
    const tty = (): PassThrough & { isTTY: boolean; text: string } => {
      const s = Object.assign(new PassThrough(), { isTTY: true, text: "" });
      s.on("data", (c: Buffer) => (s.text += c.toString()));
      return s;
    };
    const stdout = tty();
    const stderr = Object.assign(tty(), { isTTY: false }); // no spinner
    const out = new HumanOutput(
      new Screen(stdout as unknown as NodeJS.WriteStream, stderr as unknown as NodeJS.WriteStream),
    );
    const command = `ls #${ESC}]0;pwned\x07`;
    out.event({
      event: "message",
      data: {
        role: "assistant",
        parts: [
          { type: "text", text: `Running it.${ESC}[1A` },
          { type: "tool-call", tool_call_id: "t1", tool_name: "execute", args: { command } },
        ],
      },
    });
    const read = `${ESC}[8mhidden${ESC}]52;c;eA==\x07\nnext`;
    out.output("t1", read, read);
    out.event({
      event: "message",
      data: {
        role: "tool",
        parts: [
          {
            type: "tool-result",
            tool_call_id: "t1",
            result: { status: "completed", exit_code: 0, output: "hidden\nnext" },
          },
        ],
      },
    });
    out.notice(`error: ${ESC}]0;x\x07`);
    expect(stdout.text).toBe(
      "Running it.\\x1b[1A\n" +
        "▶ $ ls #\\x1b]0;pwned\\x07\n" +
        `  ${ESC}[8mhidden\n  next` +
        "\n" +
        `${ESC}[0m  exit 0\n`,
    );
    expect(stderr.text).toBe("error: \\x1b]0;x\\x07\n");
  });

  it("a chat keeps a colour, and drops a title, split between two chunks of output", () => {
    for (const isTTY of [true, false]) {
      let text = "";
      const stdout = Object.assign(new PassThrough(), { isTTY });
      stdout.on("data", (c: Buffer) => (text += c.toString()));
      const stderr = Object.assign(new PassThrough(), { isTTY: false });
      const out = new HumanOutput(
        new Screen(
          stdout as unknown as NodeJS.WriteStream,
          stderr as unknown as NodeJS.WriteStream,
        ),
      );
      // Each call's chunks as the poller hands them on, with the read each one came from.
      const reads = new Map<string, string>();
      const chunk = (id: string, text: string) => {
        reads.set(id, (reads.get(id) ?? "") + text);
        out.output(id, text, reads.get(id)!);
      };
      chunk("t1", `ok ${ESC}[3`);
      chunk("t2", `other ${ESC}]0;pw`); // another call's output between the halves
      chunk("t1", `2mgreen${ESC}[0m ${ESC}]0;pw`);
      chunk("t1", `ned${ESC}`);
      chunk("t2", `ned\x07 end\n`);
      chunk("t1", `\\ done\n`);
      const colour = (seq: string) => (isTTY ? seq : "");
      expect(text, `terminal: ${isTTY}`).toBe(
        `  ok other ${colour(`${ESC}[32m`)}green${colour(`${ESC}[0m`)}  end\n   done\n`,
      );
    }
  });
});
