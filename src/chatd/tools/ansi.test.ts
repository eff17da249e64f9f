import { describe, expect, it } from "vitest";
import { useAgents } from "../../../test/support/agent.ts";
import { plainOutput } from "./ansi.ts";
import { runTool } from "./run.ts";
import { toolContext } from "./testing.ts";

const startAgent = useAgents();

describe("plain output for the model", () => {
  it("plainOutput strips colours and cursor moves, and keeps the text", () => {
    expect(plainOutput("\x1b[31mred\x1b[0m \x1b[1;32mbold green\x1b[m\n\x1b[2K\x1b[1Gdone")).toBe(
      "red bold green\ndone",
    );
    expect(plainOutput("tabs\tand\r\nlines")).toBe("tabs\tand\r\nlines");
  });

  it("a command runs with NO_COLOR=1 and TERM=dumb unless it sets its own, and its result carries no escape sequence", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const out = await runTool(ctx, {
      toolCallId: "toolu_env",
      toolName: "execute",
      input: {
        command: `echo "$NO_COLOR/$TERM"; printf '\\033[31mred\\033[0m\\n'; TERM=xterm-256color sh -c 'echo $TERM'`,
      },
    });
    expect(out.result).toMatchObject({
      status: "completed",
      exit_code: 0,
      output: "1/dumb\nred\nxterm-256color\n",
    });
  });

  it("a timed-out command's partial output is plain too", async () => {
    const agent = await startAgent();
    const ctx = toolContext(agent.client);
    const out = await runTool(ctx, {
      toolCallId: "toolu_slow_colour",
      toolName: "execute",
      input: { command: "printf '\\033[1mstarted\\033[0m\\n'; sleep 5", timeout: "2s" },
    });
    expect(out.result).toMatchObject({ status: "timed_out", output: "started\n" });
  });
});
