#!/usr/bin/env node
// `npm run fuzz [-- --runs N] [-- --seed S]`: the fuzz test of every route (test/fuzz.test.ts)
// with N cases (default 100000) against the built packages; prints the statuses it saw.
import { spawnSync } from "node:child_process";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : fallback;
};
const runs = option("runs", "100000");
if (!/^\d+$/.test(runs)) {
  console.error(`fuzz: --runs takes a number of cases, not "${runs}"`);
  process.exit(2);
}
const seed = option("seed", undefined);
const env = { ...process.env, CHANNELKIT_FUZZ_RUNS: runs, CHANNELKIT_FUZZ_REPORT: "1", ...(seed ? { CHANNELKIT_FUZZ_SEED: seed } : {}) };
const started = Date.now();
const { status } = spawnSync("npx", ["vitest", "run", "test/fuzz.test.ts"], { stdio: "inherit", env });
console.log(`fuzz: ${runs} cases in ${Math.round((Date.now() - started) / 1000)} s, exit ${status}`);
process.exit(status ?? 1);
