// The CLI's build: the TypeScript sources bundled by esbuild into `dist/cli/<hash>/`, so a
// command starts without a run-time transpiler (tsx costs a start-up about a second and a half
// here). `npm ci` builds it (the `prepare` script); `bin/tether` runs a build only when every
// source it was made from still has the content it had then (a SHA-256 per file, kept in the
// build's manifest), and otherwise builds again first, or, when it cannot, runs the sources
// through tsx. So a stale build never runs: an edit, a `git pull` or a checkout of another
// commit is seen on the next start.
//
// Plain JavaScript on purpose: it runs before any TypeScript can. esbuild is imported only
// when a build is made.

import { createHash, randomUUID } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout } from "node:timers";
import vm from "node:vm";

/** The checkout: sources under `src/`, the build under `dist/cli/`. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ENTRY = "src/cli/main.ts";
/**
 * Inputs besides the bundled sources: a change to the recipe makes the build stale too, and so
 * does any install (npm rewrites node_modules/.package-lock.json at each), which stands for the
 * bundled packages' files.
 */
const RECIPE = [
  "bin/cli-build.mjs",
  "tsconfig.json",
  "node_modules/esbuild/package.json",
  "node_modules/.package-lock.json",
];
/**
 * Packages loaded from node_modules rather than bundled: PGlite finds its WebAssembly and data
 * files next to itself, pino its worker's, pg has an optional native part; esbuild and tsx are
 * the build's own. The rest are plain JavaScript and bundled: one module to compile where Node
 * resolved and loaded hundreds of files (the server's imports: 0.57-0.60 s of CPU -> 0.31-0.36).
 */
const EXTERNAL = ["@electric-sql/pglite", "pino", "pg", "esbuild", "tsx"];
/** The bundle: one CommonJS file, so V8 can keep its compiled code (loadBuild). */
const BUNDLE = "main.cjs";
/**
 * When a process that found no usable code cache writes one: late enough that what its start
 * compiled (a server's, up to its health answer) is in it, from a timer that never holds the
 * process open, so short commands write none.
 */
const CODE_CACHE_AFTER_MS = 3_000;
/** What sourceImportMeta's replacements use, bound before any source can shadow `require`. */
const IMPORT_META_BANNER =
  'const __tetherPath = require("node:path"), __tetherUrl = require("node:url");';
const out = (root) => path.join(root, "dist", "cli");
/** Points at the current build: `{ dir, inputs: { [path]: sha256 } }`. */
const manifestPath = (root) => path.join(out(root), "manifest.json");
/** Older builds are removed this long after they were replaced (a running process may load them). */
const OLD_BUILD_KEEP_MS = 60 * 60 * 1000;

function sha256(data) {
  return createHash("sha256").update(data).digest("hex");
}

/**
 * The current build's entry (`main.js`) when every input it was built from is unchanged, else
 * undefined. Synchronous and small: it runs on every command's start.
 */
export function freshBuild(root = ROOT) {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath(root), "utf8"));
  } catch {
    return undefined;
  }
  for (const [file, hash] of Object.entries(manifest.inputs)) {
    let content;
    try {
      content = readFileSync(path.join(root, file));
    } catch {
      return undefined;
    }
    if (sha256(content) !== hash) return undefined;
  }
  const entry = path.join(out(root), manifest.dir, BUNDLE);
  return existsSync(entry) ? entry : undefined;
}

/**
 * The sources find files next to themselves (migrations, the spawner, `web/`, `bin/tether`):
 * in every source file, `import.meta.url` and `import.meta.dirname` become those of the source
 * file, expressed relative to the bundle's `__dirname` (`dist/cli/<hash>/`) so a moved checkout
 * still works.
 */
function sourceImportMeta(outDir) {
  return {
    name: "source-import-meta",
    setup(b) {
      b.onLoad({ filter: /\.ts$/ }, async (args) => {
        let contents = await readFile(args.path, "utf8");
        if (contents.includes("import.meta")) {
          const rel = path.relative(outDir, args.path).split(path.sep).join("/");
          const relDir = path.relative(outDir, path.dirname(args.path)).split(path.sep).join("/");
          const inBundleDir = (p) => `__tetherPath.join(__dirname, ${JSON.stringify(p)})`;
          contents = contents
            .replaceAll("import.meta.url", `__tetherUrl.pathToFileURL(${inBundleDir(rel)}).href`)
            .replaceAll("import.meta.dirname", inBundleDir(relDir));
        }
        return { contents, loader: "ts" };
      });
    },
  };
}

/**
 * Builds the CLI into a fresh `dist/cli/<hash>/` and points the manifest at it. Two processes
 * building at once each write a directory of their own; the manifest is replaced atomically.
 * Returns the entry of the new build.
 */
export async function buildCli(root = ROOT) {
  const { build } = await import("esbuild");
  const OUT = out(root);
  await mkdir(OUT, { recursive: true });
  const tmp = path.join(OUT, `tmp-${process.pid}-${randomUUID()}`);
  try {
    const result = await build({
      absWorkingDir: root,
      entryPoints: [ENTRY],
      outfile: path.join(tmp, BUNDLE),
      bundle: true,
      // A command's modules still run only when it imports them (esbuild's lazy init).
      format: "cjs",
      platform: "node",
      target: "node20",
      external: EXTERNAL,
      banner: { js: IMPORT_META_BANNER },
      sourcemap: "linked", // for NODE_OPTIONS=--enable-source-maps
      metafile: true,
      logLevel: "silent",
      plugins: [sourceImportMeta(tmp)],
    });
    const inputs = {};
    const recipe = RECIPE.filter((f) => existsSync(path.join(root, f)));
    const sources = Object.keys(result.metafile.inputs).filter((f) => !f.includes("node_modules/"));
    for (const file of [...sources, ...recipe].sort())
      inputs[file] = sha256(await readFile(path.join(root, file)));
    // The relative paths in the bundle were computed for `tmp`; the final directory is a
    // sibling, so they stay right.
    const dir = sha256(JSON.stringify(inputs)).slice(0, 16);
    const final = path.join(OUT, dir);
    if (existsSync(final)) await rm(tmp, { recursive: true, force: true });
    else
      await rename(tmp, final).catch(async () => {
        // Another process renamed the same build into place first.
        await rm(tmp, { recursive: true, force: true });
      });
    const manifestTmp = `${manifestPath(root)}.${process.pid}-${randomUUID()}`;
    await writeFile(manifestTmp, JSON.stringify({ dir, inputs }, null, 1));
    await rename(manifestTmp, manifestPath(root));
    await removeOldBuilds(OUT, dir);
    return path.join(final, BUNDLE);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

async function removeOldBuilds(dir, current) {
  const now = Date.now();
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (!e.isDirectory() || e.name === current) continue;
    const p = path.join(dir, e.name);
    const s = await stat(p).catch(() => undefined);
    if (s && now - s.mtimeMs > OLD_BUILD_KEEP_MS)
      await rm(p, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The entry the CLI runs: the current build, a new one, or undefined (run the sources). */
export async function cliEntry(root = ROOT) {
  if (process.env.TETHER_CLI_BUILD === "0") return undefined;
  const fresh = freshBuild(root);
  if (fresh) return fresh;
  try {
    return await buildCli(root);
  } catch (err) {
    process.stderr.write(
      `tether: could not build the CLI (${err instanceof Error ? err.message : String(err)}); running the sources through tsx\n`,
    );
    return undefined;
  }
}

/**
 * Loads a build (a path from cliEntry) and returns its exports. Node 20 keeps no compiled code
 * between runs, so parsing and compiling the bundle's 5-6 MB took every command 0.1-0.2 s of
 * CPU; V8's code cache for it (next to the bundle, one per Node version and flags) makes that
 * a read. A missing or rejected cache is written again (CODE_CACHE_AFTER_MS). With
 * --enable-source-maps, Node's own loader runs it, so stack traces map to the sources.
 */
export function loadBuild(file, { cacheAfterMs = CODE_CACHE_AFTER_MS } = {}) {
  if (process.sourceMapsEnabled) return createRequire(import.meta.url)(file);
  const key = sha256([process.version, process.arch, ...process.execArgv].join("\0")).slice(0, 16);
  const cacheFile = `${file}.${key}.cache`;
  let cachedData;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    cachedData = undefined;
  }
  const source = readFileSync(file, "utf8");
  // Node's CommonJS wrapper, on the bundle's first line so its line numbers stay right.
  const wrapped = `(function (exports, require, module, __filename, __dirname) { ${source}\n})`;
  const script = new vm.Script(wrapped, { filename: file, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file));
  if (cachedData === undefined || script.cachedDataRejected) {
    setTimeout(() => {
      const tmp = `${cacheFile}.${process.pid}-${randomUUID()}`;
      try {
        writeFileSync(tmp, script.createCachedData());
        renameSync(tmp, cacheFile);
      } catch {
        rmSync(tmp, { force: true }); // a read-only checkout runs without the cache
      }
    }, cacheAfterMs).unref();
  }
  return module.exports;
}

// `node bin/cli-build.mjs` (the prepare script): build now, the C spawner too when a compiler
// is here (a workspace that mounts this checkout read-only finds it built).
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const entry = await buildCli();
  process.stdout.write(`built ${path.relative(ROOT, entry)}\n`);
  const { nativeSpawner } = await import("../src/agent/processes/native-spawner.js");
  const spawner = nativeSpawner(
    path.join(ROOT, "src/agent/processes/spawner.c"),
    path.join(ROOT, "dist/spawner"),
  );
  process.stdout.write(
    spawner === undefined
      ? "spawner.c did not build (no C compiler?): agents fork through spawner-main.js\n"
      : `built ${path.relative(ROOT, spawner)}\n`,
  );
}
