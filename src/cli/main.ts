// The `tether` command line (API.md): one subcommand per component. Each command imports its
// component when it runs, so `tether agent` never loads the server's modules (start-up time).

import { Command, InvalidArgumentError, Option } from "commander";
import type { AgentCommandOptions } from "./agent.ts";
import { templatesCommand } from "./templates.ts";
import { workspacesCommand } from "./workspaces.ts";
import { describeFailure } from "./chat-errors.ts";
import type { ServerOptions } from "./server.ts";
import { defaultDataDir, ServerConfigError } from "./server-state.ts";
import { parseListen } from "./listen.ts";
import { DEFAULT_LOG_LEVEL, LOG_LEVELS, type LogLevel } from "./log.ts";
import { visible } from "./terminal-text.ts";

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
    .description(
      "Serve the workspace agent contract for one workspace directory: on --listen, or over a connection it dials to --server.",
    )
    .option("--listen <host:port>", "address to listen on (port 0 picks a free port)", listenArg)
    .option(
      "--server <url>",
      "dial out to the server at this URL (its --access-url) and serve over that connection; the token is in TETHER_AGENT_TOKEN",
      httpUrl,
    )
    .option("--dir <dir>", "workspace directory (default: the current directory)")
    .option(
      "--token <token>",
      "require Authorization: Bearer <token> on every request (better: $TETHER_AGENT_TOKEN or --token-file, which ps does not show); required off loopback",
    )
    .option("--token-file <file>", "read the token from this file")
    .addOption(
      new Option("--reconnect-min-ms <n>", "first pause before dialling again")
        .argParser(positiveInt)
        .hideHelp(),
    )
    .addOption(
      new Option("--reconnect-max-ms <n>", "longest pause before dialling again")
        .argParser(positiveInt)
        .hideHelp(),
    )
    .addOption(
      new Option("--ping-interval-ms <n>", "how often the connection is pinged")
        .argParser(positiveInt)
        .hideHelp(),
    )
    .action(async (o: AgentCommandOptions) => {
      if ((o.listen === undefined) === (o.server === undefined))
        program.error("error: give exactly one of --listen <host:port> and --server <url>");
      const { runAgent } = await import("./agent.ts");
      await runAgent(o);
    });

  program.addCommand(templatesCommand());
  program.addCommand(workspacesCommand());

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
    .option(
      "--access-url <url>",
      "base URL agents dial (tether agent --server; default: the listen URL)",
      httpUrl,
    )
    .addOption(
      new Option(
        "--postgres-url <url>",
        "use this Postgres instead of the embedded database (a password is better in the environment)",
      ).env("TETHER_POSTGRES_URL"),
    )
    .option(
      "--data-dir <dir>",
      "where the embedded database and local state live (mode 0700; never inside the workspace)",
      defaultDataDir(),
    )
    .option(
      "--workspace-dir <dir>",
      "directory of the local workspace (default: the current directory)",
    )
    .option("--no-local-workspace", "do not start a local workspace agent")
    .option(
      "--secret-key-file <file>",
      "key that encrypts secrets at rest: 32 bytes, base64 or hex (or TETHER_SECRET_KEY; embedded default: <data-dir>/secret.key, made on first start)",
    )
    .option(
      "--old-secret-key-file <file>",
      "a key being rotated out (or TETHER_SECRET_KEY_OLD): what it sealed is re-encrypted at start",
    )
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
      "--lifecycle-interval-ms <n>",
      "how often idle template workspaces are looked for and stopped (default 10 s)",
      positiveInt,
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
    .option(
      "--retry-limit-ms <n>",
      "a task failing this long in a row gives up: the turn ends in error (default 10 minutes)",
      positiveInt,
    )
    .addHelpText(
      "after",
      `
Environment:
  TETHER_POSTGRES_URL    the Postgres URL, instead of --postgres-url (keeps a password off the command line)
  TETHER_SECRET_KEY      the key that encrypts provider keys, agent tokens and the replica secret at rest
                         (32 bytes, base64 or hex: openssl rand -base64 32); required with Postgres unless
                         --secret-key-file is given
  TETHER_SECRET_KEY_OLD  keys being rotated out (comma-separated); what they sealed is re-encrypted at start
The local agent and its commands get an allowlisted environment (PATH, HOME, USER, SHELL, LANG, LC_*,
TERM, TZ, TMPDIR): no key, database URL or TETHER_* secret of the server reaches them.`,
    )
    .action(
      async (
        o: Omit<
          ServerOptions,
          "workspaceDir" | "clock" | "log" | "secretKey" | "oldSecretKeys" | "childUmask"
        > & { workspaceDir?: string },
      ) => {
        const { runServer } = await import("./server.ts");
        try {
          await runServer({
            ...o,
            workspaceDir: o.workspaceDir ?? process.cwd(),
            ...(process.env.TETHER_SECRET_KEY && { secretKey: process.env.TETHER_SECRET_KEY }),
            ...(process.env.TETHER_SECRET_KEY_OLD && {
              oldSecretKeys: process.env.TETHER_SECRET_KEY_OLD,
            }),
          });
        } catch (err) {
          if (!(err instanceof ServerConfigError)) throw err;
          process.stderr.write(`tether server: ${err.message}\n`);
          process.exitCode = 2;
        }
      },
    );

  program
    .command("chat")
    .description(
      "Send a message and stream the answer and tool activity (Ctrl-C interrupts); without a " +
        "message, an interactive session on a terminal, or the message read from stdin.",
    )
    .argument("[message]", "the message")
    .option("--server <url>", "server URL", "http://127.0.0.1:3000")
    .option("--token <token>", "API token (default: $TETHER_TOKEN, or the saved one)")
    .option("--chat <id>", "continue this chat instead of starting a new one")
    .option("--workspace <name-or-id>", "a new chat's workspace (default: the server's default)")
    .option("--json", "print the chat's events as JSON lines (for scripts)")
    .action(
      async (
        message: string | undefined,
        o: { server: string; token?: string; chat?: string; workspace?: string; json?: boolean },
      ) => {
        try {
          const { runChat } = await import("./chat.ts");
          await runChat(message, o);
        } catch (err) {
          // One line that says what went wrong and what to do; no stack trace.
          process.stderr.write(`tether chat: ${visible(describeFailure(err))}\n`);
          process.exitCode = 1;
        }
      },
    );

  await program.parseAsync(argv);
}
