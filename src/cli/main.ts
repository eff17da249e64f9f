// The `tether` command line (API.md): one subcommand per component.

import { Command, InvalidArgumentError } from "commander";
import { runAgent } from "./agent.ts";
import { parseListen } from "./listen.ts";

function listenArg(value: string): string {
  try {
    parseListen(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
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

  await program.parseAsync(argv);
}
