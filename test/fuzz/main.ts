// `npm run fuzz -- --seed S --requests N --chats C`: the fuzz campaign against a real agent and
// a real server (campaign.ts). Prints `N requests, V violations` and `C chats`, then each
// violation with the seed and index that replay it (`--only I`, `--only-chat K`).

import { Command, InvalidArgumentError } from "commander";
import { DEFAULTS, formatViolation, runCampaign } from "./campaign.ts";
import { stopAll } from "./procs.ts";

function whole(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError("Must be a whole number.");
  return n;
}
const list = (value: string, prev: number[] = []) => [...prev, ...value.split(",").map(whole)];

const program = new Command()
  .name("fuzz")
  .description(
    "Fuzz campaign: a real agent and server on loopback, seeded hostile requests and chats.",
  )
  .option("--seed <n>", "campaign seed", whole, 1)
  .option("--requests <n>", "how many requests", whole, 1000)
  .option("--chats <n>", "how many hostile chats", whole, 10)
  .option("--concurrency <n>", "requests in flight at once", whole, DEFAULTS.concurrency)
  .option("--chat-concurrency <n>", "chats at once", whole, DEFAULTS.chatConcurrency)
  .option("--only <i,...>", "replay only these request indexes", list)
  .option("--only-chat <k,...>", "replay only these chats", list)
  .option(
    "--rss-limit-mb <n>",
    "bound on each process's RSS",
    whole,
    DEFAULTS.rssLimitBytes / 2 ** 20,
  )
  .option("--keep", "keep the campaign's directory (logs, workspace, data)")
  .option("--verbose", "print progress");
program.parse();
const o = program.opts<{
  seed: number;
  requests: number;
  chats: number;
  concurrency: number;
  chatConcurrency: number;
  only?: number[];
  onlyChat?: number[];
  rssLimitMb: number;
  keep?: boolean;
  verbose?: boolean;
}>();
// The first SIGINT or SIGTERM stops sending and runs the end checks; a second one kills.
const stop = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    if (!stop.signal.aborted) {
      process.stderr.write(
        "stopping: finishing the requests and chats in flight, then the end checks\n",
      );
      stop.abort();
      return;
    }
    void stopAll().finally(() => process.exit(130));
  });
}
const result = await runCampaign({
  ...DEFAULTS,
  seed: o.seed,
  requests: o.requests,
  chats: o.chats,
  concurrency: o.concurrency,
  chatConcurrency: o.chatConcurrency,
  ...(o.only && { only: o.only }),
  ...(o.onlyChat && { onlyChats: o.onlyChat }),
  rssLimitBytes: o.rssLimitMb * 2 ** 20,
  stop: stop.signal,
  ...(o.keep && { keep: true }),
  ...(o.verbose && {
    progress: (l: string) =>
      process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${l}\n`),
  }),
});
console.log(`${result.requests} requests, ${result.violations.length} violations`);
console.log(`${result.chats} chats`);
if (result.stopped) console.log("stopped early (signal): the figures are of what was sent");
const rss = Object.entries(result.maxRss).map(([k, v]) => `${k} ${Math.round(v / 2 ** 20)} MiB`);
console.log(`seed ${o.seed}, ${Math.round(result.wallMs / 1000)} s, max RSS ${rss.join(", ")}`);
if (o.verbose) console.error(JSON.stringify(result.stats));
for (const v of result.violations) console.log(`violation ${formatViolation(v, o.seed)}`);
if (result.violations.length > 0) console.log(`kept ${result.dir}`);
process.exit(result.violations.length > 0 ? 1 : 0);
