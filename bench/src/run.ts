/**
 * `npm run bench [-- options]`: channelkit against hand-written baselines on node:http, on
 * SQLite and on Postgres. See docs/benchmarks.md. Each scenario is measured, in each round, on
 * the servers that answer it, in an order rotating each round: `baseline` (the bench's
 * hand-written server), `lean` (the afternoon handler, execute only), `channelkit` (the
 * bench's embedding of the sources) and `serve` (the built `channelkit serve`).
 *
 *   --quick                 one short round (the CI smoke test; about two minutes): lean and serve on
 *                           execute-json only, the other scenarios on the baseline and channelkit
 *   --rounds N --duration S --warmup S --connections N --memory-streams N
 *   --store sqlite|postgres one store only
 *   --scenarios a,b         a subset (ids in bench/src/scenarios.ts)
 *   --servers a,b           a subset of baseline, lean, channelkit, serve, base (default: all; serve
 *                           needs npm run build, and is skipped, saying why, without it)
 *   --base DIR              also measure `base`: the channelkit server on the sources of another
 *                           checkout (a worktree of an earlier commit, npm ci'd), bundled by
 *                           bench.mjs, in the same rounds as this tree's (ratios channelkit ÷ base)
 *   --name NAME             results file name in bench/results/ (default latest, quick or partial)
 *   --profile SCENARIO      profile the channelkit server under that load (node --cpu-prof) and
 *                           print where its time goes; --profile-baseline profiles the baseline,
 *                           --profile-server KIND another forked server (lean, base)
 *   --rerender NAME         recompute bench/results/NAME.md (and the summaries in NAME.json)
 *                           from the rounds NAME.json holds, without measuring again
 *   --floor                 what the Node adapter costs alone: a trivial JSON echo on plain
 *                           node:http, as a Web handler behind toNodeHandler, and as a Reply
 *   --runtimes              execute JSON on Node, Bun and Deno, each runtime's own server on the
 *                           same SQLite file (bench/src/runtimes.ts), as ratios to Node; written to
 *                           bench/results/runtimes.md (--name). Not part of --quick, which says so
 *   --instances             two channelkit processes on one database against one, the same load
 *                           either way (execute JSON, the webhook message), with the lock waits
 *                           (bench/src/instances.ts); written to bench/results/instances.* (--name)
 *   --stream-cost           what recording costs per write: server CPU per stream of the `slow`
 *                           flow (50 deltas, 100 ms apart, so 50 writes) on a resumable channel
 *                           against a plain one, --streams N (100) at once, --rounds (5)
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { cpus, loadavg, platform, release, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { explainRequestPath, type QueryPlan } from "./explain.js";
import { type Measurement, median, openStreams, type RequestSpec, requestLoad, streamLoad } from "./load.js";
import { type InstancesResults, instancesMarkdown, instancesOnStore } from "./instances.js";
import { printProfile, summarizeProfile } from "./profile.js";
import {
  evaluateTargets,
  type Machine,
  mediansOf,
  type MemoryResult,
  type MemoryRound,
  machineLine,
  memoryPerStream,
  RESULTS_FORMAT,
  type Results,
  ratiosOf,
  type ScenarioResult,
  type Settings,
  summarize,
  toMarkdown,
} from "./report.js";
import { runtimesMarkdown, runtimesMode } from "./runtimes.js";
import { type Scenario, SCENARIOS, slowStream } from "./scenarios.js";
import { type Seed, seed } from "./seed.js";
import { type BenchServer, baseServerScript, CliServer, ServerProcess, serveUnavailable, staleBuild } from "./servers.js";
import { type FloorVariant, type ForkedKind, SERVER_KINDS, type ServerKind, type Side, type StoreKind } from "./shared.js";

const POSTGRES_ENV = "CHANNELKIT_TEST_POSTGRES_URL";
const buildDir = dirname(fileURLToPath(import.meta.url));
const benchDir = resolve(buildDir, "../..");
const repoRoot = resolve(benchDir, "..");

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    rounds: { type: "string" },
    duration: { type: "string" },
    warmup: { type: "string" },
    connections: { type: "string" },
    "memory-streams": { type: "string" },
    store: { type: "string" },
    scenarios: { type: "string" },
    servers: { type: "string" },
    name: { type: "string" },
    profile: { type: "string" },
    floor: { type: "boolean", default: false },
    runtimes: { type: "boolean", default: false },
    instances: { type: "boolean", default: false },
    "stream-cost": { type: "boolean", default: false },
    streams: { type: "string" },
    rerender: { type: "string" },
    "profile-baseline": { type: "boolean", default: false },
    "profile-server": { type: "string" },
    // Read by bench.mjs, which bundles the base server; here only allowed.
    base: { type: "string" },
  },
  strict: true,
});

const settings: Settings = {
  quick: args.quick ?? false,
  rounds: Number(args.rounds ?? (args.quick ? 1 : 5)),
  durationS: Number(args.duration ?? (args.quick ? 1 : 5)),
  warmupS: Number(args.warmup ?? (args.quick ? 0.3 : 1)),
  connections: Number(args.connections ?? 16),
  memoryStreams: Number(args["memory-streams"] ?? (args.quick ? 100 : 200)),
};
const scenarios = args.scenarios ? SCENARIOS.filter((s) => args.scenarios?.split(",").includes(s.id)) : SCENARIOS;
if (scenarios.length === 0) throw new Error(`bench: no such scenario; known: ${SCENARIOS.map((s) => s.id).join(", ")}`);

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const log = (line: string) => console.log(line);

function machine(): Machine {
  const info = cpus();
  return {
    cpus: info.length,
    cpuModel: info[0]?.model.trim() ?? "unknown",
    memoryGiB: totalmem() / 1024 ** 3,
    node: process.version,
    platform: platform(),
    release: release(),
    loadAverageStart: loadavg(),
  };
}

/** A store to run on: where it is, and how to dispose of it. */
interface PreparedStore {
  store: StoreKind;
  location: string;
  dispose(): Promise<void>;
}

/** Stores still to dispose of, also on Ctrl-C: a benchmark database must not outlive the run. */
const undisposed = new Set<PreparedStore>();
process.once("SIGINT", () => {
  console.log("\nbench: interrupted, removing the benchmark databases");
  void Promise.allSettled([...undisposed].map((store) => store.dispose())).then(() => process.exit(130));
});

function tracked(store: PreparedStore): PreparedStore {
  undisposed.add(store);
  const dispose = store.dispose;
  return {
    ...store,
    dispose: () => {
      undisposed.delete(store);
      return dispose();
    },
  };
}

async function prepareSqlite(): Promise<PreparedStore> {
  const dir = mkdtempSync(join(tmpdir(), "channelkit-bench-"));
  return tracked({ store: "sqlite", location: join(dir, "bench.db"), dispose: async () => rmSync(dir, { recursive: true, force: true }) });
}

async function preparePostgres(serverUrl: string): Promise<PreparedStore> {
  const name = `channelkit_bench_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 5000 });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return tracked({ store: "postgres", location: url.toString(), dispose: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) });
}

/** The requests one side of a scenario sends: the reference side of a scenario measured against itself sends the reference's. */
function requestsOf(scenario: Scenario, side: Side, data: Seed): Promise<RequestSpec[]> {
  return side === "reference" && scenario.reference ? scenario.reference.requests(data) : scenario.requests(data);
}

/** The server a side runs on: the reference side is the channelkit server. */
function serverOf(side: Side, servers: Servers): BenchServer {
  const server = servers[side === "reference" ? "channelkit" : side];
  if (!server) throw new Error(`bench: no ${side} server`);
  return server;
}

/** Scenarios on which `--quick` measures the lean baseline and channelkit serve too (the others: the baseline and channelkit only). */
const QUICK_EVERY_SERVER = new Set(["execute-json"]);

/**
 * The sides a scenario is measured on, in this run: the servers that answer it (its `on`,
 * else all), less those not running; `reference` and channelkit for a scenario measured
 * against itself.
 */
function sidesOf(scenario: Scenario, servers: Servers): Side[] {
  if (scenario.reference) return servers.channelkit ? ["reference", "channelkit"] : [];
  return kindsOf(scenario).filter((kind) => servers[kind] !== undefined);
}

/** The servers that answer a scenario in this run (--quick measures most on two). */
function kindsOf(scenario: Scenario): readonly ServerKind[] {
  if (scenario.reference) return ["channelkit"];
  const kinds = scenario.on ?? SERVER_KINDS;
  return settings.quick && !QUICK_EVERY_SERVER.has(scenario.id) ? kinds.filter((kind) => kind === "baseline" || kind === "channelkit") : kinds;
}

async function measure(scenario: Scenario, side: Side, server: BenchServer, data: Seed, durationS: number, connections: number): Promise<Measurement> {
  const specs = await requestsOf(scenario, side, data);
  const options = {
    baseUrl: server.url,
    connections,
    durationS,
    expectStatus: scenario.expectStatus,
    alsoAccept: scenario.alsoAccept ?? [],
    spread: scenario.spread === true,
  };
  const before = await server.cpu();
  const m = await (scenario.mode === "stream" ? streamLoad(options, specs) : requestLoad(options, specs));
  const after = await server.cpu();
  const used = after.user - before.user + (after.system - before.system);
  return m.total > 0 ? { ...m, cpuUs: used / m.total } : m;
}

/** Shapes of a JSON value (keys and types), to check the baseline answers what channelkit answers. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? [] : [shape(value[0])];
  if (value !== null && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, shape(v)]),
    );
  return value === null ? "null" : typeof value;
}

async function answer(server: BenchServer, spec: RequestSpec): Promise<{ status: number; summary: string; body: string }> {
  const response = await fetch(server.url + spec.path, { method: spec.method, headers: spec.headers, ...(spec.body === undefined ? {} : { body: spec.body }) });
  const body = await response.text();
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
    const events = body
      .split("\n\n")
      .filter((f) => f.startsWith("data: "))
      .map((f) => JSON.parse(f.slice(6)) as { type: string });
    return { status: response.status, summary: events.map((e) => e.type).join(","), body };
  }
  return { status: response.status, summary: JSON.stringify(shape(JSON.parse(body))), body };
}

/**
 * Sends each scenario's request once to each server it is measured on: the same status as
 * expected, the same shape as channelkit's answer (the same body for history). A scenario
 * measured against itself sends its request and its reference's to channelkit.
 */
async function checkEquivalence(servers: Servers, data: Seed): Promise<void> {
  for (const scenario of scenarios) {
    const sides = sidesOf(scenario, servers);
    const answers = new Map<Side, Awaited<ReturnType<typeof answer>>>();
    for (const side of sides) answers.set(side, await answer(serverOf(side, servers), (await requestsOf(scenario, side, data))[0] as RequestSpec));
    const wrong = [...answers].filter(([, a]) => a.status !== scenario.expectStatus);
    if (wrong.length > 0) {
      throw new Error(
        `bench: ${scenario.id}: expected ${scenario.expectStatus}, ${[...answers].map(([side, a]) => `${side} answered ${a.status} (${a.body.slice(0, 200)})`).join(", ")}`,
      );
    }
    const reference = answers.get("channelkit");
    if (!reference) continue;
    for (const [side, a] of answers) {
      if (side === "channelkit") continue;
      const same = scenario.id.startsWith("history") ? a.body === reference.body : a.summary === reference.summary;
      if (!same)
        log(
          `  warning: ${scenario.id}: the ${side}'s answer differs from channelkit's:\n    ${side.padEnd(10)} ${a.summary.slice(0, 400)}\n    channelkit ${reference.summary.slice(0, 400)}`,
        );
    }
  }
}

/**
 * Memory of open streams, in a server process of its own started for this measurement (a
 * process that already served the load keeps freed pages, which blurs RSS): a few streams
 * opened and closed first so that lazily built code and pools exist, then a sample before
 * and one while `memoryStreams` streams are open.
 */
async function measureMemory(kind: ForkedKind, store: StoreKind, location: string, data: Seed): Promise<MemoryRound> {
  const server = await ServerProcess.start(buildDir, { kind, store, location });
  try {
    (await openStreams(server.url, slowStream(data), 10)).close();
    await sleep(settings.quick ? 500 : 1500);
    const before = await server.memory();
    const open = await openStreams(server.url, slowStream(data), settings.memoryStreams);
    await sleep(300);
    const during = await server.memory();
    open.close();
    // Let the cancelled runs be stored before the server stops.
    await sleep(500);
    return { streams: settings.memoryStreams, opened: open.opened, before, during };
  } finally {
    await server.stop();
  }
}

const fmt = (m: Measurement) =>
  `${Math.round(m.rps).toString().padStart(6)} /s  p50 ${m.p50.toFixed(2)} ms  p99 ${m.p99.toFixed(2)} ms${m.cpuUs === undefined ? "" : `  cpu ${m.cpuUs.toFixed(0)} µs/req`}${m.ttfeP50 === undefined ? "" : `  first event p50 ${m.ttfeP50.toFixed(2)} ms p99 ${(m.ttfeP99 ?? 0).toFixed(2)} ms`}${m.unexpected > 0 ? `  UNEXPECTED ${m.unexpected}/${m.total}` : ""}`;

type Servers = Partial<Record<ServerKind, BenchServer>>;

/** The servers to measure (--servers, else all), started on the seeded store; one that cannot start is skipped, with the reason noted. */
async function startServers(store: StoreKind, location: string, skipped: string[]): Promise<Servers> {
  const wanted = args.servers ? (args.servers.split(",") as ServerKind[]) : SERVER_KINDS;
  const unknown = wanted.filter((kind) => !SERVER_KINDS.includes(kind));
  if (unknown.length > 0) throw new Error(`bench: no server ${unknown.join(", ")}; known: ${SERVER_KINDS.join(", ")}`);
  const needed = new Set(scenarios.flatMap(kindsOf));
  const servers: Servers = {};
  for (const kind of wanted) {
    if (!needed.has(kind)) continue;
    if (kind === "base" && !baseServerScript()) {
      // Measured only when a tree to compare with is given.
      if (args.servers) skipped.push("base not measured: no --base DIR given");
      continue;
    }
    if (kind === "base") log(`[${store}] base: the channelkit server on the sources of ${process.env.BENCH_BASE_TREE}`);
    if (kind !== "serve") {
      servers[kind] = await ServerProcess.start(buildDir, { kind, store, location });
      continue;
    }
    const unavailable = serveUnavailable(repoRoot);
    const note = (reason: string) => {
      log(reason);
      if (!skipped.includes(reason)) skipped.push(reason);
    };
    if (unavailable) {
      note(unavailable);
      continue;
    }
    const stale = staleBuild(repoRoot);
    if (stale) note(`warning: ${stale}`);
    try {
      servers.serve = await CliServer.start(repoRoot, location);
    } catch (error) {
      note(`channelkit serve not measured on ${store}: it did not start (${error instanceof Error ? error.message.split("\n")[0] : String(error)})`);
      continue;
    }
    log(`[${store}] channelkit serve: ${CliServer.commandLine(location)} (CHANNELKIT_SECRET_KEY = the bench's master key, NODE_ENV=production)`);
  }
  return servers;
}

async function runStore(
  prepared: PreparedStore,
  results: { scenarios: ScenarioResult[]; memory: MemoryResult[]; plans: Partial<Record<StoreKind, QueryPlan[]>>; skipped: string[] },
) {
  const { store, location } = prepared;
  let t = Date.now();
  const data = await seed(store, location);
  log(
    `[${store}] seeded ${data.rows.apiKeys} keys, ${data.rows.conversations} conversations, ${data.rows.messages} messages and ${data.rows.runs} runs in ${((Date.now() - t) / 1000).toFixed(1)} s`,
  );
  results.plans[store] = await explainRequestPath(store, location, data);
  for (const plan of results.plans[store] ?? []) if (plan.scans) log(`  warning: ${plan.operation} scans: ${plan.plan.join(" | ")}`);

  t = Date.now();
  const servers = await startServers(store, location, results.skipped);
  try {
    await checkEquivalence(servers, data);
    const runs = new Map<string, Partial<Record<Side, Measurement[]>>>(scenarios.map((s) => [s.id, {}]));
    const memorySides = (["baseline", "channelkit", "base"] as const).filter((kind) => servers[kind] !== undefined);
    const memory: Partial<Record<ForkedKind, MemoryRound[]>> = {};
    for (let round = 0; round < settings.rounds; round++) {
      for (const [index, scenario] of scenarios.entries()) {
        const sides = sidesOf(scenario, servers);
        // The order rotates each round (and from one scenario to the next).
        const order = sides.map((_, i) => sides[(i + round + index) % sides.length] as Side);
        const connections = scenario.connections ?? settings.connections;
        const measured = runs.get(scenario.id) as Partial<Record<Side, Measurement[]>>;
        for (const side of order) {
          const server = serverOf(side, servers);
          if (settings.warmupS > 0) await measure(scenario, side, server, data, settings.warmupS, connections);
          const m = await measure(scenario, side, server, data, settings.durationS, connections);
          measured[side] = [...(measured[side] ?? []), m];
          log(`[${store} ${round + 1}/${settings.rounds}] ${scenario.id.padEnd(19)} ${side.padEnd(10)} ${fmt(m)}`);
        }
      }
      if (settings.memoryStreams > 0) {
        for (const kind of round % 2 === 0 ? memorySides : [...memorySides].reverse()) {
          const m = await measureMemory(kind, store, location, data);
          memory[kind] = [...(memory[kind] ?? []), m];
          const per = (m.during.heapUsed - m.before.heapUsed) / Math.max(1, m.opened) / 1024;
          const rss = (m.during.rss - m.before.rss) / Math.max(1, m.opened) / 1024;
          log(
            `[${store} ${round + 1}/${settings.rounds}] memory (${m.opened}/${m.streams} streams) ${kind.padEnd(10)} heap ${per.toFixed(1)} KiB/stream, RSS ${rss.toFixed(1)} KiB/stream`,
          );
        }
      }
    }
    for (const scenario of scenarios) {
      const rounds = runs.get(scenario.id) as Partial<Record<Side, Measurement[]>>;
      if (Object.keys(rounds).length === 0) continue;
      results.scenarios.push({
        store,
        scenario: scenario.id,
        title: scenario.title,
        mode: scenario.mode,
        connections: scenario.connections ?? settings.connections,
        ...(scenario.reference ? { reference: scenario.reference.title } : {}),
        sides: Object.keys(rounds) as Side[],
        rounds,
        median: mediansOf(rounds),
        ratios: ratiosOf(rounds),
      });
    }
    if (settings.memoryStreams > 0 && memorySides.length > 0) {
      results.memory.push({
        store,
        streams: settings.memoryStreams,
        rounds: memory,
        perStream: Object.fromEntries(Object.entries(memory).map(([kind, rounds]) => [kind, memoryPerStream(rounds)])),
      });
    }
  } finally {
    await Promise.all(Object.values(servers).map((server) => server.stop()));
  }
  log(`[${store}] measured in ${((Date.now() - t) / 1000).toFixed(1)} s`);
}

async function profileMode(scenarioId: string): Promise<void> {
  const scenario = SCENARIOS.find((s) => s.id === scenarioId);
  if (!scenario) throw new Error(`bench: no scenario ${scenarioId}; known: ${SCENARIOS.map((s) => s.id).join(", ")}`);
  const store = (args.store ?? "sqlite") as StoreKind;
  const url = process.env[POSTGRES_ENV];
  if (store === "postgres" && !url) throw new Error(`bench: --store postgres needs ${POSTGRES_ENV}`);
  const prepared = store === "sqlite" ? await prepareSqlite() : await preparePostgres(url as string);
  // A scenario measured against itself runs on channelkit either way; --profile-baseline then profiles its reference.
  const chosen = args["profile-server"] as ForkedKind | undefined;
  const side: Side = chosen ?? (args["profile-baseline"] ? (scenario.reference ? "reference" : "baseline") : "channelkit");
  const kind: ForkedKind = chosen ?? (scenario.reference ? "channelkit" : side === "baseline" ? "baseline" : "channelkit");
  const dir = join(benchDir, ".profiles");
  mkdirSync(dir, { recursive: true });
  const started = Date.now();
  try {
    const data = await seed(store, prepared.location);
    const server = await ServerProcess.start(buildDir, { kind, store, location: prepared.location }, ["--cpu-prof", `--cpu-prof-dir=${dir}`]);
    const connections = scenario.connections ?? settings.connections;
    await measure(scenario, side, server, data, 1, connections);
    const durationS = Number(args.duration ?? 10);
    const m = await measure(scenario, side, server, data, durationS, connections);
    log(`${side} ${scenario.id} on ${store} under --cpu-prof: ${fmt(m)}`);
    await server.stop();
    const newest = readdirSync(dir)
      .filter((f) => f.endsWith(".cpuprofile"))
      .map((f) => join(dir, f))
      .filter((f) => statSync(f).mtimeMs >= started)
      .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
    if (!newest) throw new Error("bench: the server wrote no profile");
    printProfile(summarizeProfile(newest), newest);
  } finally {
    await prepared.dispose();
  }
}

/**
 * `--floor`: one trivial JSON echo served three ways, in rotating order: plain node:http, a
 * Web handler behind toNodeHandler (Web Request and Response), and a Reply through
 * `dispatch`, the path a channel service takes on @channelkit/node.
 */
async function floorMode(): Promise<void> {
  const variants: FloorVariant[] = ["plain", "web", "reply"];
  const label: Record<FloorVariant, string> = { plain: "node:http             ", web: "Web Request/Response  ", reply: "dispatch → Reply      " };
  const servers = Object.fromEntries(await Promise.all(variants.map(async (v) => [v, await ServerProcess.startFloor(buildDir, v)] as const))) as Record<
    FloorVariant,
    ServerProcess
  >;
  const spec: RequestSpec = { method: "POST", path: "/", headers: { "content-type": "application/json" }, body: JSON.stringify({ payload: "hello" }) };
  const results: Record<FloorVariant, Measurement[]> = { plain: [], web: [], reply: [] };
  try {
    for (let round = 0; round < settings.rounds; round++) {
      const order = variants.map((_, i) => variants[(i + round) % variants.length] as FloorVariant);
      for (const variant of order) {
        const options = { baseUrl: servers[variant].url, connections: settings.connections, expectStatus: 200 };
        await requestLoad({ ...options, durationS: settings.warmupS }, [spec]);
        const m = await requestLoad({ ...options, durationS: settings.durationS }, [spec]);
        results[variant].push(m);
        log(`[floor ${round + 1}/${settings.rounds}] ${label[variant]} ${fmt(m)}`);
      }
    }
  } finally {
    await Promise.all(variants.map((v) => servers[v].stop()));
  }
  const plain = summarize(results.plain);
  const cost = (v: FloorVariant) => {
    const s = summarize(results[v]);
    return `${Math.round(s.rps)} req/s (${(s.rps / plain.rps).toFixed(2)}×, about ${(1e6 / s.rps - 1e6 / plain.rps).toFixed(0)} µs of one core per request over node:http)`;
  };
  log(`\nmedians: node:http ${Math.round(plain.rps)} req/s; Web Request/Response behind toNodeHandler ${cost("web")}; dispatch → Reply ${cost("reply")}.`);
}

/** Runs `count` streams at once on `key`, each read to its end; resolves with how many ended with `finish`. */
async function streamsToEnd(server: ServerProcess, spec: RequestSpec, count: number): Promise<number> {
  const url = new URL(spec.path, server.url);
  const one = () =>
    new Promise<boolean>((resolve) => {
      const req = request(url, { method: spec.method, headers: spec.headers, agent: false }, (res) => {
        let tail = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          tail = (tail + chunk).slice(-200);
        });
        res.on("end", () => resolve(res.statusCode === 200 && tail.includes('"type":"finish"')));
        res.on("error", () => resolve(false));
      });
      req.on("error", () => resolve(false));
      req.end(spec.body);
    });
  return (await Promise.all(Array.from({ length: count }, one))).filter(Boolean).length;
}

/**
 * `--stream-cost`: the server CPU a stream of the `slow` flow costs on a resumable channel and
 * on a plain one (50 deltas 100 ms apart: one recorded chunk per delta, the open and the end
 * going in the run's own writes), `--streams` of them at once, alternating, per store. The
 * difference divided by the chunks is about what one chunk costs the instance that records it.
 */
async function streamCostMode(): Promise<void> {
  const count = Number(args.streams ?? 100);
  const rounds = Number(args.rounds ?? 5);
  const stores: StoreKind[] = args.store ? [args.store as StoreKind] : ["sqlite", "postgres"];
  for (const store of stores) {
    const prepared = await prepareStore(store, []);
    if (!prepared) continue;
    try {
      const data = await seed(store, prepared.location);
      const server = await ServerProcess.start(buildDir, { kind: "channelkit", store, location: prepared.location });
      const base = slowStream(data);
      const spec = (key: string): RequestSpec => ({ ...base, headers: { ...base.headers, authorization: `Bearer ${key}` } });
      const keys = { plain: data.slowKey, resumable: data.resumableSlowKey };
      const cost: Record<keyof typeof keys, number[]> = { plain: [], resumable: [] };
      try {
        for (const kind of ["plain", "resumable"] as const) await streamsToEnd(server, spec(keys[kind]), 10);
        for (let round = 0; round < rounds; round++) {
          for (const kind of round % 2 === 0 ? (["plain", "resumable"] as const) : (["resumable", "plain"] as const)) {
            const before = await server.cpu();
            const ended = await streamsToEnd(server, spec(keys[kind]), count);
            const after = await server.cpu();
            const us = (after.user - before.user + (after.system - before.system)) / Math.max(1, ended);
            cost[kind].push(us);
            log(`[${store} ${round + 1}/${rounds}] ${kind.padEnd(9)} ${ended}/${count} streams, ${Math.round(us)} µs of server CPU per stream`);
          }
        }
      } finally {
        await server.stop();
      }
      const plain = median(cost.plain);
      const resumable = median(cost.resumable);
      log(
        `[${store}] medians: plain ${Math.round(plain)} µs, resumable ${Math.round(resumable)} µs per stream (${(resumable / plain).toFixed(2)}×); +${Math.round(resumable - plain)} µs for 50 chunks (the open and the end in the run's own writes): ${Math.round((resumable - plain) / 50)} µs a chunk`,
      );
    } finally {
      await prepared.dispose();
    }
  }
}

/** `--rerender NAME`: the summaries and the markdown again, from the rounds stored in NAME.json. */
function rerender(name: string): void {
  const dir = join(benchDir, "results");
  const stored = JSON.parse(readFileSync(join(dir, `${name}.json`), "utf8")) as Results;
  if (stored.format !== RESULTS_FORMAT) {
    throw new Error(
      `bench: bench/results/${name}.json was written by an earlier bench (results format ${stored.format ?? 1}, this one reads ${RESULTS_FORMAT}: several servers per scenario, their rounds by server): it cannot be rerendered; its .md stays as it was written`,
    );
  }
  for (const s of stored.scenarios) {
    s.median = mediansOf(s.rounds);
    s.ratios = ratiosOf(s.rounds);
  }
  for (const m of stored.memory) m.perStream = Object.fromEntries(Object.entries(m.rounds).map(([kind, rounds]) => [kind, memoryPerStream(rounds)]));
  const { targets: _old, ...rest } = stored;
  const final: Results = { ...rest, targets: evaluateTargets(rest) };
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(final, null, 2)}\n`);
  writeFileSync(join(dir, `${name}.md`), toMarkdown(final));
  log(`bench/results/${name}.md and ${name}.json rewritten from their rounds`);
}

/** Writes `bench/results/<name>.json` and `.md`, prints the markdown and where it went. */
function writeResults(name: string, results: unknown, markdown: string, began: number): void {
  const dir = join(benchDir, "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(dir, `${name}.md`), markdown);
  log(`\n${markdown}`);
  log(`results written to bench/results/${name}.md and ${name}.json in ${((Date.now() - began) / 1000).toFixed(0)} s`);
}

/** `--instances`: two channelkit processes on one database against one (bench/src/instances.ts). */
async function instancesMode(began: number): Promise<void> {
  log(`channelkit bench --instances: ${settings.rounds} round(s), ${settings.durationS} s per measurement, ${settings.connections} connections`);
  const info = machine();
  const results: InstancesResults = {
    date: new Date().toISOString(),
    machine: "",
    settings: { rounds: settings.rounds, durationS: settings.durationS, warmupS: settings.warmupS, connections: settings.connections },
    skipped: [],
    stores: [],
  };
  for (const store of args.store ? [args.store as StoreKind] : (["sqlite", "postgres"] as const)) {
    const prepared = await prepareStore(store, results.skipped);
    if (!prepared) continue;
    try {
      results.stores.push({ store, scenarios: await instancesOnStore(buildDir, prepared, settings, log) });
    } finally {
      await prepared.dispose();
    }
  }
  results.machine = `Machine: ${machineLine({ ...info, loadAverageEnd: loadavg() })}`;
  writeResults(args.name ?? "instances", results, instancesMarkdown(results), began);
}

/** A store to measure on, or null (the reason added to `skipped`) for Postgres without its URL. */
async function prepareStore(store: StoreKind, skipped: string[]): Promise<PreparedStore | null> {
  if (store === "sqlite") return prepareSqlite();
  const url = process.env[POSTGRES_ENV];
  if (url) return preparePostgres(url);
  const reason = `Postgres skipped: ${POSTGRES_ENV} is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres); the benchmark creates a database there and drops it afterwards.`;
  log(reason);
  skipped.push(reason);
  return null;
}

async function main(): Promise<void> {
  const began = Date.now();
  if (args.rerender) return rerender(args.rerender);
  if (args.profile) return profileMode(args.profile);
  if (args.floor) return floorMode();
  if (args["stream-cost"]) return streamCostMode();
  if (args.instances) return instancesMode(began);
  if (args.runtimes) {
    log(`channelkit bench --runtimes: ${settings.rounds} round(s), ${settings.durationS} s per measurement, ${settings.connections} connections`);
    const info = machine();
    const measured = { ...(await runtimesMode(buildDir, settings, log)), machine: "" };
    measured.machine = `Machine: ${machineLine({ ...info, loadAverageEnd: loadavg() })}`;
    writeResults(args.name ?? "runtimes", measured, runtimesMarkdown(measured), began);
    return;
  }
  const info = machine();
  log(
    `channelkit bench${settings.quick ? " --quick" : ""}: ${settings.rounds} round(s), ${settings.durationS} s per measurement, ${settings.connections} connections`,
  );
  const skipped: string[] = [];
  if (settings.quick) {
    const reason = "Bun and Deno against Node not measured by --quick (they start two more runtimes): npm run bench -- --runtimes";
    log(reason);
    skipped.push(reason);
  }
  const stores: StoreKind[] = args.store ? [args.store as StoreKind] : ["sqlite", "postgres"];
  if (settings.quick) {
    const reason = `--quick measures the lean baseline and channelkit serve on ${[...QUICK_EVERY_SERVER].join(", ")} only, the other scenarios on the baseline and channelkit`;
    log(reason);
    skipped.push(reason);
  }
  const results: Omit<Results, "targets"> = {
    format: RESULTS_FORMAT,
    date: new Date().toISOString(),
    machine: info,
    settings,
    skipped,
    scenarios: [],
    memory: [],
    plans: {},
  };

  for (const store of stores) {
    const prepared = await prepareStore(store, skipped);
    if (!prepared) continue;
    try {
      await runStore(prepared, results);
    } finally {
      await prepared.dispose();
    }
  }

  info.loadAverageEnd = loadavg();
  const final: Results = { ...results, targets: evaluateTargets(results) };
  const name = args.name ?? (settings.quick ? "quick" : args.store || args.scenarios ? "partial" : "latest");
  writeResults(name, final, toMarkdown(final), began);
}

await main();
