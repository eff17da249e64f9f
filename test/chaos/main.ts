// `npm run chaos -- --seed S --scenarios N`: a fault campaign against the Postgres server of
// TETHER_TEST_DATABASE_URL (or --postgres-url). Prints `N scenarios, F faults, V violations`,
// then each violation with the seed that replays its scenario (`--scenario-seed`).

import { Command, InvalidArgumentError } from "commander";
import { formatViolation } from "./checker.ts";
import { DEFAULTS, runCampaign } from "./campaign.ts";
import { killAll } from "./procs.ts";

function whole(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError("Must be a whole number.");
  return n;
}

const program = new Command()
  .name("chaos")
  .description(
    "Fault-injection campaign: real replicas, agents and Postgres; checks every tool call.",
  )
  .option("--seed <n>", "campaign seed", whole, 1)
  .option("--scenarios <n>", "how many scenarios", whole, 10)
  .option("--scenario-seed <n...>", "replay these scenario seeds only")
  .option("--concurrency <n>", "chats at once per scenario", whole, DEFAULTS.concurrency)
  .option("--parallel <n>", "scenarios at once on the shared replicas", whole, 1)
  .option("--replicas <n>", "server replicas", whole, DEFAULTS.replicas)
  .option("--agents <n>", "workspace agents per scenario", whole, DEFAULTS.agentsPerScenario)
  .option(
    "--dialout-every <n>",
    "every n-th agent of a scenario dials out (tether agent --server); 0: none",
    whole,
    DEFAULTS.dialoutEvery,
  )
  .option(
    "--fault-window-ms <n>",
    "how long faults are injected per scenario",
    whole,
    DEFAULTS.faultWindowMs,
  )
  .option(
    "--max-request-delay-ms <n>",
    "longest delay of a request in transit (above 2000 it can outrun the contract's age margin)",
    whole,
    DEFAULTS.maxRequestDelayMs,
  )
  .option("--postgres-url <url>", "Postgres server (default: $TETHER_TEST_DATABASE_URL)")
  .option("--keep", "keep logs and workspaces even without violations")
  .option("--verbose", "print progress per scenario");

program.parse();
const o = program.opts<{
  seed: number;
  scenarios: number;
  scenarioSeed?: string[];
  concurrency: number;
  parallel: number;
  replicas: number;
  agents: number;
  dialoutEvery: number;
  faultWindowMs: number;
  maxRequestDelayMs: number;
  postgresUrl?: string;
  verbose?: boolean;
  keep?: boolean;
}>();
const postgresUrl = o.postgresUrl ?? process.env.TETHER_TEST_DATABASE_URL;
if (!postgresUrl) {
  console.error(
    "Set TETHER_TEST_DATABASE_URL or pass --postgres-url (a server where the campaign may create a database).",
  );
  process.exit(2);
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => void killAll().finally(() => process.exit(130)));
}
const scenarioSeeds = o.scenarioSeed?.map(whole);
const result = await runCampaign({
  ...DEFAULTS,
  seed: o.seed,
  scenarios: scenarioSeeds?.length ?? o.scenarios,
  ...(scenarioSeeds && { scenarioSeeds }),
  concurrency: o.concurrency,
  parallel: o.parallel,
  replicas: Math.max(2, o.replicas),
  agentsPerScenario: Math.max(1, o.agents),
  dialoutEvery: o.dialoutEvery,
  faultWindowMs: o.faultWindowMs,
  maxRequestDelayMs: o.maxRequestDelayMs,
  postgresUrl,
  keepWorkDir: o.keep === true,
  log: (line) => {
    if (o.verbose) console.error(line);
  },
});
const s = result.stats;
console.log(`${s.scenarios} scenarios, ${s.faults} faults, ${result.violations.length} violations`);
console.log(
  `  faults: ${Object.entries(s.faultsByKind)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ")}`,
);
console.log(
  `  exercised: ${s.chats} chats, ${s.toolCalls} tool calls, ${s.failovers} failovers, ` +
    `${s.interrupts} interrupts, ${s.chatsInError} chats in error, ${s.dialoutAgents} dial-out ` +
    `agents (${s.dialoutToolCalls} tool calls, ${s.dialoutConnects} connections); results: ` +
    Object.entries(s.results)
      .map(([k, n]) => `${k} ${n}`)
      .join(", "),
);
for (const v of result.violations) {
  console.log(`${formatViolation(v)}\n  replay: npm run chaos -- --scenario-seed ${v.seed}`);
}
if (result.workDir) console.log(`logs and workspaces kept in ${result.workDir}`);
if (result.databaseUrl) console.log(`database kept: ${result.databaseUrl}`);
process.exit(result.violations.length > 0 ? 1 : 0);
