import { defineConfig } from "vitest/config";
import { LongestFirst } from "./test/support/sequencer.ts";

// Three projects, so a change can be checked in seconds (`npx vitest run --project unit`):
// - unit: pure functions and in-process servers with no database and no child process;
// - db: against PGlite, and Postgres too when TETHER_TEST_DATABASE_URL is set;
// - e2e: real processes (agents, servers, replicas), the browser, the chaos and fuzz campaigns.
// A new test file lands in e2e unless it is listed in unit or db.
const UNIT = [
  "src/contract/**/*.test.ts",
  "src/chatd/agent-failure-text.test.ts",
  "src/metrics/**/*.test.ts",
  "src/model/**/*.test.ts",
  "src/cli/chat-stream.test.ts",
  "src/cli/config.test.ts",
  "src/cli/idle-gc.test.ts",
  "src/cli/log.test.ts",
  "src/cli/server-state.test.ts",
  "src/cli/sse-events.test.ts",
  "src/cli/terminal-text.test.ts",
  "src/cli/unseen-output.test.ts",
  "src/agent/files/**/*.test.ts",
  "src/agent/toolcalls/**/*.test.ts",
  "src/agent/dialout.test.ts",
  "src/agent/http-router.test.ts",
  "src/agent/processes/output.test.ts",
  "src/api/web.test.ts",
  "src/chatd/audit-tool-calls.test.ts",
  "src/chatd/billing.test.ts",
  "src/chatd/chats.test.ts",
  "src/chatd/step-ahead.test.ts",
  "test/dialout/transport.test.ts",
  "src/chatd/db/values.test.ts",
  "src/chatd/transitions/storable.test.ts",
  "src/chatd/worker/failure.test.ts",
  "src/chatd/worker/retry.test.ts",
  "src/chatd/secrets/box.test.ts",
  "src/chatd/tools/declarations.test.ts",
  "src/chatd/tools/duration.test.ts",
  "src/chatd/tools/truncate.test.ts",
  "src/chatd/prompt/**/*.test.ts",
  "test/chaos/checker.test.ts",
  "test/support/fake-provider.test.ts",
  "test/web/build.test.ts",
  "src/workspaces/builds.test.ts",
  "src/workspaces/readiness.test.ts",
  "src/workspaces/runs.test.ts",
  "src/workspaces/scrub.test.ts",
  "src/workspaces/templates.test.ts",
  "src/workspaces/terraform.test.ts",
  "src/workspaces/workspace.test.ts",
];
const DB = [
  "src/chatd/db/**/*.test.ts",
  "src/chatd/secrets/columns.test.ts",
  "src/cli/setup.test.ts",
  "src/api/audit-gaps.test.ts",
  "src/api/auth.test.ts",
  "src/api/chats.test.ts",
  "src/api/error-codes.test.ts",
  "src/api/input.test.ts",
  "src/api/models.test.ts",
  "src/api/offboarding.test.ts",
  "src/api/openapi.test.ts",
  "src/api/prompt.test.ts",
  "src/api/relay.test.ts",
  "src/api/stream.test.ts",
  "src/api/templates.test.ts",
  "src/api/template-max-ttl.test.ts",
  "src/api/usage.test.ts",
  "src/chatd/config-cache.test.ts",
  "src/chatd/agents.test.ts",
  "src/workspaces/agent-tokens.test.ts",
  "src/workspaces/lifecycle.test.ts",
  "src/workspaces/readiness-access.test.ts",
  "test/chatd/cost.test.ts",
  "test/chatd/db-errors.test.ts",
  "test/chatd/transitions.test.ts",
];
const ALL = ["src/**/*.test.ts", "test/**/*.test.ts"];
const shared = { testTimeout: 20_000, hookTimeout: 20_000 };
/** Made once per run: the migrated PGlite that every test's fresh database starts from. */
const globalSetup = ["test/support/global-setup.ts"];

export default defineConfig({
  test: {
    // Vitest's default is one worker per core less one: a single worker on a 2-core machine.
    // Most e2e files wait on child processes and sockets: with two files at a time a quarter of
    // the two cores stayed idle (667 s); with three, under 5 % (548 s).
    maxWorkers: 3,
    // The longest files first (test/durations.json stands in for the last run's on a fresh clone).
    sequence: { sequencer: LongestFirst },
    projects: [
      // Unit and database files share their modules within a worker (isolate: false): each
      // file re-importing the sources and opening its own PGlite cost more than its tests.
      // Their tests hold no process-wide state between files (no fake timers, env or globals
      // left behind); e2e files, with servers, agents and signals, keep a module graph each.
      { test: { ...shared, name: "unit", include: UNIT, isolate: false } },
      { test: { ...shared, name: "db", include: DB, exclude: UNIT, isolate: false, globalSetup } },
      {
        test: { ...shared, name: "e2e", include: ALL, exclude: [...UNIT, ...DB], globalSetup },
      },
    ],
  },
});
