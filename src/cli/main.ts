// The `tether` command line (API.md): one subcommand per component.

import { Command, InvalidArgumentError } from "commander";
import { runAgent } from "./agent.ts";
import { runChat } from "./chat.ts";
import { runServer, type ServerOptions } from "./server.ts";
import { parseListen } from "./listen.ts";
import { DEFAULT_LOG_LEVEL, LOG_LEVELS, type LogLevel } from "./log.ts";

function listenArg(value: string): string {
  try {
    parseListen(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
}

function httpUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError("Must be a URL, e.g. http://10.0.0.5:3000.");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new InvalidArgumentError("Must be an http:// or https:// URL.");
  return value;
}

function logLevel(value: string): LogLevel {
  if (!(LOG_LEVELS as readonly string[]).includes(value))
    throw new InvalidArgumentError(`Must be one of ${LOG_LEVELS.join(", ")}.`);
  return value as LogLevel;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0)
    throw new InvalidArgumentError("Must be a positive whole number.");
  return n;
}

export async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name("tether")
    .description("A self-hosted control plane for AI coding agents.")
    .showHelpAfterError();

  program
    .command("agent")
    .description("Serve the workspace agent contract for one workspace directory.")
    .requiredOption(
      "--listen <host:port>",
      "address to listen on (port 0 picks a free port)",
      listenArg,
    )
    .option("--dir <dir>", "workspace directory (default: the current directory)")
    .option("--token <token>", "require Authorization: Bearer <token> on every request")
    .action(async (o: { listen: string; dir?: string; token?: string }) => {
      await runAgent(o);
    });

  program
    .command("server")
    .description(
      "Run the control plane: API, chat worker, embedded database and a local workspace agent.",
    )
    .option("--listen <host:port>", "address to listen on", listenArg, "127.0.0.1:3000")
    .option(
      "--advertise-url <url>",
      "base URL other replicas reach this one at (default: the listen URL)",
      httpUrl,
    )
    .option("--postgres-url <url>", "use this Postgres instead of the embedded database")
    .option("--data-dir <dir>", "where the embedded database and local state live", "./.tether")
    .option(
      "--workspace-dir <dir>",
      "directory of the local workspace (default: the current directory)",
    )
    .option("--no-local-workspace", "do not start a local workspace agent")
    .option(
      "--model <spec>",
      "default model: anthropic:<m>, openai:<m>, google:<m>, bedrock:<m>, openai-compatible:<m>, or demo",
    )
    .option("--model-base-url <url>", "base URL for openai-compatible models")
    .option("--lease-ms <n>", "chat lease length", positiveInt)
    .option("--heartbeat-ms <n>", "lease renewal interval", positiveInt)
    .option(
      "--agent-answer-timeout-ms <n>",
      "bound on each side-effecting request to an agent",
      positiveInt,
    )
    .option("--log-level <level>", "least level logged to stderr", logLevel, DEFAULT_LOG_LEVEL)
    .option(
      "--trust-proxy",
      "take the client address and https from X-Forwarded-* (only behind a proxy that sets them)",
    )
    .option(
      "--session-idle-ms <n>",
      "a browser session unused this long ends (default 7 days)",
      positiveInt,
    )
    .option(
      "--task-timeout-ms <n>",
      "bound on each task attempt; a task that runs longer is retried (default 15 minutes)",
      positiveInt,
    )
    .action(
      async (
        o: Omit<ServerOptions, "workspaceDir" | "clock" | "log"> & { workspaceDir?: string },
      ) => {
        await runServer({
          ...o,
          workspaceDir: o.workspaceDir ?? process.cwd(),
        });
      },
    );

  program
    .command("chat")
    .description("Send a message, stream the answer and tool activity; Ctrl-C interrupts.")
    .argument("<message>", "the message")
    .option("--server <url>", "server URL", "http://127.0.0.1:3000")
    .option("--token <token>", "API token (default: $TETHER_TOKEN, or the saved one)")
    .option("--chat <id>", "continue this chat instead of starting a new one")
    .action(async (message: string, o: { server: string; token?: string; chat?: string }) => {
      await runChat(message, o);
    });

  await program.parseAsync(argv);
}
