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
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

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
/** CommonJS packages bundled into ESM call `require` for Node's modules; this gives them one. */
const REQUIRE_BANNER =
  'import { createRequire as __tetherRequire } from "node:module"; const require = __tetherRequire(import.meta.url);';
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
  const entry = path.join(out(root), manifest.dir, "main.js");
  return existsSync(entry) ? entry : undefined;
}

/**
 * esbuild keeps `import.meta` of the bundle, which lives in `dist/cli/<hash>/`. The sources
 * find files next to themselves (migrations, the spawner, `web/`, `bin/tether`): in every
 * source file, `import.meta.url` and `import.meta.dirname` become those of the source file,
 * expressed relative to the bundle so a moved checkout still works.
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
          contents = contents
            .replaceAll("import.meta.url", `new URL(${JSON.stringify(rel)}, import.meta.url).href`)
            .replaceAll(
              "import.meta.dirname",
              `(import.meta.dirname + ${JSON.stringify("/" + relDir)})`,
            );
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
      entryPoints: { main: ENTRY },
      outdir: tmp,
      bundle: true,
      splitting: true, // each command loads only what it imports
      format: "esm",
      platform: "node",
      target: "node20",
      external: EXTERNAL,
      banner: { js: REQUIRE_BANNER },
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
    return path.join(final, "main.js");
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
  if (fresh) return pathToFileURL(fresh).href;
  try {
    return pathToFileURL(await buildCli(root)).href;
  } catch (err) {
    process.stderr.write(
      `tether: could not build the CLI (${err instanceof Error ? err.message : String(err)}); running the sources through tsx\n`,
    );
    return undefined;
  }
}

// `node bin/cli-build.mjs` (the prepare script): build now.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const entry = await buildCli();
  process.stdout.write(`built ${path.relative(ROOT, entry)}\n`);
}
