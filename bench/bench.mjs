#!/usr/bin/env node
// `npm run bench`: bundles bench/src (TypeScript) with the esbuild the repository already has,
// then runs it. The @channelkit/* packages are bundled from their sources, as the tests use
// them, so the numbers are those of the working tree without a rebuild of dist/.
//
// `--base DIR` (or CHANNELKIT_BENCH_BASE=DIR): also bundles the bench's channelkit server on
// the packages' sources of another checkout (e.g. a `git worktree` of an earlier commit, with
// its own `npm ci`), measured as the server `base` in the same run as this tree's: a before
// and after taken under the same noise.
import { build } from "esbuild";
import { existsSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
// One directory per run, so that a second run never swaps the server code of a first one.
const outdir = fileURLToPath(new URL(`./.build/run-${process.pid}/`, import.meta.url));
process.on("exit", () => rmSync(outdir, { recursive: true, force: true }));
const packagesOf = (tree) => {
  const pkg = (name, entry = "index") => `${tree}/packages/${name}/src/${entry}.ts`;
  return {
    "@channelkit/core/adapter": pkg("core", "adapter"),
    "@channelkit/core/demo": pkg("core", "demo"),
    "@channelkit/core": pkg("core"),
    "@channelkit/kysely": pkg("kysely"),
    "@channelkit/node": pkg("node"),
  };
};
const common = {
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: "linked",
  logLevel: "warning",
  // Dependencies stay where npm put them; only the channelkit sources are bundled.
  external: ["autocannon", "better-sqlite3", "jose", "kysely", "pg", "rate-limiter-flexible", "zod"],
};

await build({
  ...common,
  entryPoints: ["run", "channelkit-server", "baseline-server", "lean-server", "floor-server"].map((name) => `${root}bench/src/${name}.ts`),
  outdir,
  outExtension: { ".js": ".mjs" },
  alias: packagesOf(root.replace(/\/$/, "")),
});

const baseFlag = process.argv.indexOf("--base");
const base = baseFlag >= 0 ? process.argv[baseFlag + 1] : process.env.CHANNELKIT_BENCH_BASE;
if (base) {
  const tree = resolve(base);
  if (!existsSync(`${tree}/packages/core/src/index.ts`)) throw new Error(`bench: --base ${base}: no packages/core/src/index.ts there`);
  if (!existsSync(`${tree}/node_modules`)) throw new Error(`bench: --base ${base}: no node_modules there (run npm ci in it)`);
  // Bundled into the other tree, so that its dependencies are those its own npm ci installed.
  const baseOut = `${tree}/bench/.build/base-${process.pid}/`;
  process.on("exit", () => rmSync(baseOut, { recursive: true, force: true }));
  await build({
    ...common,
    entryPoints: [`${root}bench/src/channelkit-server.ts`],
    outdir: baseOut,
    outExtension: { ".js": ".mjs" },
    alias: packagesOf(tree),
  });
  process.env.BENCH_BASE_TREE = tree;
  process.env.BENCH_BASE_SERVER = `${baseOut}channelkit-server.mjs`;
}

await import(pathToFileURL(`${outdir}run.mjs`).href);
