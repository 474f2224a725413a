/**
 * `npm run bench -- --runtimes`: execute JSON (the `echo` flow, a new conversation per request)
 * served by the same service on the same seeded SQLite file, by each runtime's own server:
 * Node (the bench's channelkit server: @channelkit/node's serve, sqlite() on better-sqlite3),
 * Bun (examples/bun/server.ts: Bun.serve, bunSqlite()) and Deno (examples/deno/server.ts:
 * Deno.serve, nodeSqlite()). autocannon is the client, from this Node process; the runtimes take
 * turns in an order that rotates each round. Reported as medians and as ratios to Node.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type Measurement, median, requestLoad } from "./load.js";
import { type Settings, type Summary, summarize } from "./report.js";
import { SCENARIOS } from "./scenarios.js";
import { seed } from "./seed.js";
import { ServerProcess } from "./servers.js";
import { BENCH_SECRET_KEY } from "./shared.js";

export type Runtime = "node" | "bun" | "deno";

export interface RuntimeResult {
  runtime: Runtime;
  /** The runtime's version (`--version`), or Node's. */
  version: string;
  server: string;
  storage: string;
  rounds: Measurement[];
  median: Summary;
  /** Paired by round against Node, median of the per-round ratios (Node itself: 1). */
  ratio: Summary;
}

export interface RuntimesResults {
  date: string;
  settings: Pick<Settings, "rounds" | "durationS" | "warmupS" | "connections">;
  machine: string;
  skipped: string[];
  runtimes: RuntimeResult[];
}

const SERVERS: Record<Exclude<Runtime, "node">, { example: string; args: string[]; storage: string }> = {
  bun: { example: "examples/bun/server.ts", args: [], storage: "bunSqlite() (bun:sqlite)" },
  deno: { example: "examples/deno/server.ts", args: ["run", "-A"], storage: "nodeSqlite() (Deno's node:sqlite)" },
};

interface Running {
  url: string;
  stop(): Promise<void>;
}

/** Starts a runtime example server on `db` (from the repository root, as its README does) and resolves once it listens. */
function startRuntime(root: string, binary: string, runtime: Exclude<Runtime, "node">, db: string): Promise<Running> {
  const { example, args } = SERVERS[runtime];
  const child: ChildProcess = spawn(binary, [...args, example], {
    cwd: root,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", CHANNELKIT_DB: db, CHANNELKIT_SECRET_KEY: BENCH_SECRET_KEY, NODE_ENV: "production" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  return new Promise((done, fail) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error(`bench: ${runtime} did not listen in 30 s:\n${output}`));
    }, 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const found = output.match(/listening on (http:\/\/\S+)/);
      if (!found) return;
      clearTimeout(timer);
      child.stdout?.off("data", read);
      // Errors stay visible; the rest of its output is dropped.
      child.stderr?.off("data", read);
      child.stderr?.on("data", (more: Buffer) => process.stderr.write(`[${runtime}] ${more}`));
      done({
        url: found[1] as string,
        stop: () =>
          child.exitCode !== null || child.signalCode !== null
            ? Promise.resolve()
            : new Promise<void>((stopped) => {
                const force = setTimeout(() => child.kill("SIGKILL"), 5000);
                child.once("exit", () => {
                  clearTimeout(force);
                  stopped();
                });
                child.kill("SIGTERM");
              }),
      });
    };
    child.stdout?.on("data", read);
    child.stderr?.on("data", read);
    child.once("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`bench: ${runtime} exited (${code}) before listening:\n${output}`));
    });
  });
}

/** `node_modules/.bin/<runtime>` and its version, or why it cannot run. */
async function runtimeBinary(root: string, runtime: Exclude<Runtime, "node">): Promise<{ path: string; version: string } | { missing: string }> {
  const path = join(root, "node_modules", ".bin", runtime);
  if (!existsSync(path)) return { missing: `${path} does not exist (npm install, the ${runtime} devDependency)` };
  const { execFileSync } = await import("node:child_process");
  try {
    return { path, version: execFileSync(path, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim().split("\n")[0] as string };
  } catch (error) {
    return { missing: `${path} --version failed: ${(error as Error).message}` };
  }
}

const fmt = (m: Measurement) =>
  `${Math.round(m.rps).toString().padStart(6)} /s  p50 ${m.p50.toFixed(2)} ms  p99 ${m.p99.toFixed(2)} ms${m.unexpected > 0 ? `  UNEXPECTED ${m.unexpected}/${m.total}` : ""}`;

export async function runtimesMode(buildDir: string, settings: Settings, log: (line: string) => void): Promise<Omit<RuntimesResults, "machine">> {
  const root = resolve(buildDir, "../../..");
  const skipped: string[] = [];
  const available: { runtime: Exclude<Runtime, "node">; path: string; version: string }[] = [];
  if (!existsSync(join(root, "packages/kysely/dist/bun-sqlite.js")) || !existsSync(join(root, "packages/kysely/dist/node-sqlite.js"))) {
    throw new Error("bench --runtimes: the Bun and Deno servers import the built packages: npm run build first");
  }
  for (const runtime of ["bun", "deno"] as const) {
    const binary = await runtimeBinary(root, runtime);
    if ("missing" in binary) {
      const reason = `${runtime} skipped: ${binary.missing}`;
      log(reason);
      skipped.push(reason);
    } else available.push({ runtime, ...binary });
  }
  const scenario = SCENARIOS.find((s) => s.id === "execute-json");
  if (!scenario) throw new Error("bench: no execute-json scenario");

  const dir = mkdtempSync(join(tmpdir(), "channelkit-bench-runtimes-"));
  const db = join(dir, "bench.db");
  const servers: Partial<Record<Runtime, Running>> = {};
  try {
    const data = await seed("sqlite", db);
    const specs = await scenario.requests(data);
    const node = await ServerProcess.start(buildDir, { kind: "channelkit", store: "sqlite", location: db });
    servers.node = { url: node.url, stop: () => node.stop() };
    for (const { runtime, path } of available) servers[runtime] = await startRuntime(root, path, runtime, db);
    const order: Runtime[] = ["node", ...available.map((a) => a.runtime)];
    const rounds = Object.fromEntries(order.map((r) => [r, [] as Measurement[]])) as Record<Runtime, Measurement[]>;
    for (let round = 0; round < settings.rounds; round++) {
      const turn = order.map((_, i) => order[(i + round) % order.length] as Runtime);
      for (const runtime of turn) {
        const options = { baseUrl: (servers[runtime] as Running).url, connections: settings.connections, expectStatus: 200 };
        if (settings.warmupS > 0) await requestLoad({ ...options, durationS: settings.warmupS }, specs);
        const m = await requestLoad({ ...options, durationS: settings.durationS }, specs);
        rounds[runtime].push(m);
        log(`[runtimes ${round + 1}/${settings.rounds}] execute-json ${runtime.padEnd(5)} ${fmt(m)}`);
      }
    }
    const versions: Record<Runtime, string> = { node: `Node ${process.version}`, bun: "", deno: "" };
    for (const a of available) versions[a.runtime] = `${a.runtime === "bun" ? "Bun" : "Deno"} ${a.version.match(/\d+\.\d+\.\d+\S*/)?.[0] ?? a.version}`;
    const paired = (runtime: Runtime, pick: (m: Measurement) => number) => median(rounds[runtime].map((m, i) => pick(m) / pick(rounds.node[i] as Measurement)));
    return {
      date: new Date().toISOString(),
      settings: { rounds: settings.rounds, durationS: settings.durationS, warmupS: settings.warmupS, connections: settings.connections },
      skipped,
      runtimes: order.map((runtime) => ({
        runtime,
        version: versions[runtime],
        server: runtime === "node" ? "@channelkit/node serve (bench/src/channelkit-server.ts)" : `${SERVERS[runtime].example}`,
        storage: runtime === "node" ? "sqlite() (better-sqlite3)" : SERVERS[runtime].storage,
        rounds: rounds[runtime],
        median: summarize(rounds[runtime]),
        ratio: { rps: paired(runtime, (m) => m.rps), p50: paired(runtime, (m) => m.p50), p99: paired(runtime, (m) => m.p99) },
      })),
    };
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

export function runtimesMarkdown(results: RuntimesResults): string {
  const lines = [
    "# channelkit on Node, Bun and Deno: execute JSON",
    "",
    `${results.date}. ${results.machine}. ${results.settings.rounds} round(s) of ${results.settings.durationS} s (warm-up ${results.settings.warmupS} s), ${results.settings.connections} connections, autocannon from Node; the runtimes take turns, in an order that rotates each round. The same service (demo flows, \`echo\`, a new conversation per request) on the same seeded SQLite file.`,
    "",
  ];
  for (const reason of results.skipped) lines.push(`> ${reason}`, "");
  lines.push(
    "| runtime | server | storage | req/s (median) | p50 ms | p99 ms | req/s vs Node | p50 vs Node |",
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const r of results.runtimes) {
    lines.push(
      `| ${r.version} | ${r.server} | ${r.storage} | ${Math.round(r.median.rps)} | ${r.median.p50.toFixed(2)} | ${r.median.p99.toFixed(2)} | ${r.ratio.rps.toFixed(2)}× | ${r.ratio.p50.toFixed(2)}× |`,
    );
  }
  lines.push("", "Ratios are paired by round (each round's runtime against that round's Node), then the median.", "");
  return lines.join("\n");
}
