/**
 * `npm run bench -- --instances`: two channelkit processes on one database against one, the
 * same load either way (16 connections: all on the one instance, or 8 on each of the two at
 * once), on SQLite and on Postgres. What it shows: whether throughput is lost to contention
 * between instances (their CPU per request, and requests per second), and how often an
 * instance waited for another's lock:
 *
 * - SQLite: each transaction's `BEGIN IMMEDIATE` timed in the servers (bench/src/lock-waits.ts);
 *   a wait is one of 1 ms or more, SQLite's busy handler's shortest sleep.
 * - Postgres: `pg_stat_activity` sampled every 10 ms during the load, from a connection of the
 *   orchestrator: the share of samples in which a backend of the bench's database waited on a
 *   lock (`wait_event_type = 'Lock'`, row locks included), and `pg_stat_database.deadlocks`.
 *
 * Scenarios: execute JSON (a new conversation per request: instances share only the write lock
 * and the tables' last pages) and the webhook message (64 conversations, dealt in turn; with two
 * instances each gets its own 32, as a load balancer keeping a conversation on one instance
 * would, and both count the same webhook client's rate limit).
 */
import pg from "pg";
import { type LoadOptions, type Measurement, median, type RequestSpec, requestLoad } from "./load.js";
import { type Settings, type Summary, summarize } from "./report.js";
import { type Scenario, SCENARIOS } from "./scenarios.js";
import { seed } from "./seed.js";
import { ServerProcess } from "./servers.js";
import type { LockWaits, StoreKind } from "./shared.js";

const SCENARIO_IDS = ["execute-json", "webhook-new-message"];
/** How often Postgres is asked who waits on a lock. */
const SAMPLE_MS = 10;

export type Layout = "one" | "two";

/** The lock waits of one measurement, summed over both instances. */
export interface LockSample extends LockWaits {
  /** Postgres: samples taken, and those in which a backend waited on a lock. */
  samples?: number;
  samplesWaiting?: number;
  deadlocks?: number;
}

export interface InstancesScenario {
  id: string;
  title: string;
  rounds: Record<Layout, Measurement[]>;
  locks: Record<Layout, LockSample[]>;
  median: Record<Layout, Summary>;
  /** Two instances ÷ one, paired by round, median. */
  ratio: { rps: number; cpuUs: number };
}

export interface InstancesResults {
  date: string;
  machine: string;
  settings: Pick<Settings, "rounds" | "durationS" | "warmupS" | "connections">;
  skipped: string[];
  stores: { store: StoreKind; scenarios: InstancesScenario[] }[];
}

/** A prepared store: where it is (run.ts makes and disposes of it). */
export interface InstancesStore {
  store: StoreKind;
  location: string;
}

const fmt = (m: Measurement) =>
  `${Math.round(m.rps).toString().padStart(6)} /s  cpu ${Math.round(m.cpuUs ?? 0)} µs/req${m.unexpected > 0 ? `  UNEXPECTED ${m.unexpected}/${m.total}` : ""}`;

/** Samples who waits on a lock in the bench's database while `during` runs. */
async function sampledLocks(url: string, during: () => Promise<Measurement>): Promise<[Measurement, LockSample]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const deadlocks = async () =>
      Number((await client.query<{ deadlocks: string }>("select deadlocks from pg_stat_database where datname = current_database()")).rows[0]?.deadlocks ?? 0);
    const before = await deadlocks();
    let samples = 0;
    let samplesWaiting = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await client.query<{ waiting: string }>(
          "select count(*) as waiting from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        );
        samples++;
        if (Number(rows[0]?.waiting) > 0) samplesWaiting++;
        await new Promise((done) => setTimeout(done, SAMPLE_MS));
      }
    })();
    const m = await during();
    sampling = false;
    await sampler;
    return [m, { begins: 0, waits: 0, waitedMs: 0, busy: 0, samples, samplesWaiting, deadlocks: (await deadlocks()) - before }];
  } finally {
    await client.end();
  }
}

/** The load of one layout: 16 connections on the first instance, or 8 on each at once; CPU of both. */
async function load(
  layout: Layout,
  servers: ServerProcess[],
  specs: RequestSpec[],
  scenario: Scenario,
  connections: number,
  durationS: number,
): Promise<Measurement> {
  const options = (server: ServerProcess, share: number): LoadOptions => ({
    baseUrl: server.url,
    connections: share,
    durationS,
    expectStatus: scenario.expectStatus,
    alsoAccept: scenario.alsoAccept ?? [],
    spread: scenario.spread === true,
  });
  const loaded = layout === "one" ? [servers[0] as ServerProcess] : servers;
  const share = Math.round(connections / loaded.length);
  const cpu = async () => (await Promise.all(servers.map((s) => s.cpu()))).reduce((sum, u) => sum + u.user + u.system, 0);
  const before = await cpu();
  const parts = await Promise.all(loaded.map((server, i) => requestLoad(options(server, share), shareOf(specs, scenario, i, loaded.length))));
  const used = (await cpu()) - before;
  const total = parts.reduce((sum, m) => sum + m.total, 0);
  return {
    rps: parts.reduce((sum, m) => sum + m.rps, 0),
    p50: median(parts.map((m) => m.p50)),
    p99: Math.max(...parts.map((m) => m.p99)),
    unexpected: parts.reduce((sum, m) => sum + m.unexpected, 0),
    total,
    cpuUs: total > 0 ? used / total : Number.NaN,
  };
}

/**
 * The requests of the `i`-th of `count` instances: for a scenario that deals its requests to
 * conversations (the webhook's 64), each instance its own part of them, as a load balancer
 * that keeps a conversation on one instance would; two load generators dealing the same list
 * in step would send each conversation's messages to both instances at the same moment.
 */
function shareOf(specs: RequestSpec[], scenario: Scenario, i: number, count: number): RequestSpec[] {
  if (!scenario.spread || count === 1) return specs;
  const size = Math.ceil(specs.length / count);
  return specs.slice(i * size, (i + 1) * size);
}

async function locksOf(servers: ServerProcess[]): Promise<LockWaits> {
  const all = await Promise.all(servers.map((s) => s.locks()));
  const sum: LockWaits = { begins: 0, waits: 0, waitedMs: 0, busy: 0 };
  for (const l of all) {
    sum.begins += l.begins;
    sum.waits += l.waits;
    sum.waitedMs += l.waitedMs;
    sum.busy += l.busy;
  }
  return sum;
}

/** Measures one store, seeded by this function, with two channelkit servers on it. */
export async function instancesOnStore(
  buildDir: string,
  prepared: InstancesStore,
  settings: Settings,
  log: (line: string) => void,
): Promise<InstancesScenario[]> {
  const { store, location } = prepared;
  const data = await seed(store, location);
  const servers = await Promise.all([0, 1].map(() => ServerProcess.start(buildDir, { kind: "channelkit", store, location, countLockWaits: true })));
  try {
    const results: InstancesScenario[] = [];
    for (const scenario of SCENARIOS.filter((s) => SCENARIO_IDS.includes(s.id))) {
      const specs = await scenario.requests(data);
      const rounds: Record<Layout, Measurement[]> = { one: [], two: [] };
      const locks: Record<Layout, LockSample[]> = { one: [], two: [] };
      for (let round = 0; round < settings.rounds; round++) {
        const order: Layout[] = round % 2 === 0 ? ["one", "two"] : ["two", "one"];
        for (const layout of order) {
          if (settings.warmupS > 0) await load(layout, servers, specs, scenario, settings.connections, settings.warmupS);
          const before = await locksOf(servers);
          const measure = () => load(layout, servers, specs, scenario, settings.connections, settings.durationS);
          const [m, sampled] = store === "postgres" ? await sampledLocks(location, measure) : [await measure(), null];
          const after = await locksOf(servers);
          const waits: LockSample = {
            ...sampled,
            begins: after.begins - before.begins,
            waits: after.waits - before.waits,
            waitedMs: after.waitedMs - before.waitedMs,
            busy: after.busy - before.busy,
          };
          rounds[layout].push(m);
          locks[layout].push(waits);
          log(`[${store} instances ${round + 1}/${settings.rounds}] ${scenario.id.padEnd(19)} ${layout} ${fmt(m)}  ${lockLine(waits)}`);
        }
      }
      const paired = (pick: (m: Measurement) => number) => median(rounds.two.map((m, i) => pick(m) / pick(rounds.one[i] as Measurement)));
      results.push({
        id: scenario.id,
        title: scenario.title,
        rounds,
        locks,
        median: { one: summarize(rounds.one), two: summarize(rounds.two) },
        ratio: { rps: paired((m) => m.rps), cpuUs: paired((m) => m.cpuUs ?? Number.NaN) },
      });
    }
    return results;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
}

function lockLine(l: LockSample): string {
  if (l.samples !== undefined) {
    return `lock waits: ${l.samplesWaiting} of ${l.samples} samples (${pct(l.samplesWaiting ?? 0, l.samples)}), deadlocks ${l.deadlocks}`;
  }
  return `blocked: ${l.waits} of ${l.begins} transactions (${pct(l.waits, l.begins)}), ${Math.round(l.waitedMs)} ms; busy at once: ${l.busy}`;
}

const pct = (part: number, whole: number) => (whole === 0 ? "–" : `${((100 * part) / whole).toFixed(1)}%`);

/** The lock waits of a layout over its rounds, as one line of the table. */
function locksCell(samples: LockSample[], durationS: number): string {
  const sum = (pick: (l: LockSample) => number) => samples.reduce((total, l) => total + pick(l), 0);
  if (samples.some((l) => l.samples !== undefined)) {
    return `${pct(
      sum((l) => l.samplesWaiting ?? 0),
      sum((l) => l.samples ?? 0),
    )} of samples; ${sum((l) => l.deadlocks ?? 0)} deadlocks`;
  }
  const seconds = samples.length * durationS;
  return `${sum((l) => l.busy).toLocaleString("en")} busy at once; blocked: ${pct(
    sum((l) => l.waits),
    sum((l) => l.begins),
  )} of ${sum((l) => l.begins).toLocaleString("en")} transactions; ${(sum((l) => l.waitedMs) / seconds).toFixed(1)} ms a second`;
}

export function instancesMarkdown(results: InstancesResults): string {
  const { rounds, durationS, warmupS, connections } = results.settings;
  const lines = [
    "# Two channelkit instances on one database",
    "",
    `${results.date}. ${results.machine}. ${rounds} round(s) of ${durationS} s (warm-up ${warmupS} s); ${connections} connections either way: all on one instance, or half on each of two at once (two autocannon clients in the orchestrator). Both instances run throughout; CPU is both processes' per request. Layouts alternate in order each round; ratios are paired by round (two ÷ one), then the median.`,
    "",
  ];
  for (const reason of results.skipped) lines.push(`> ${reason}`, "");
  lines.push(
    "| store | scenario | one: req/s | one: CPU µs/req | two: req/s | two: CPU µs/req | two ÷ one: req/s | two ÷ one: CPU | lock waits, one | lock waits, two |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
  );
  for (const { store, scenarios } of results.stores) {
    for (const s of scenarios) {
      lines.push(
        `| ${store} | ${s.title} | ${Math.round(s.median.one.rps)} | ${Math.round(s.median.one.cpuUs ?? Number.NaN)} | ${Math.round(s.median.two.rps)} | ${Math.round(s.median.two.cpuUs ?? Number.NaN)} | ${s.ratio.rps.toFixed(2)}× | ${s.ratio.cpuUs.toFixed(2)}× | ${locksCell(s.locks.one, durationS)} | ${locksCell(s.locks.two, durationS)} |`,
      );
    }
  }
  lines.push(
    "",
    "Lock waits: on SQLite, how many `BEGIN IMMEDIATE` were answered `SQLITE_BUSY` at once (another process held the write lock; the group commit tries again without blocking), and the transactions whose `BEGIN IMMEDIATE` blocked the process 1 ms or more (SQLite's busy handler sleeping) with the time they blocked per second of load; on Postgres, the share of `pg_stat_activity` samples (every 10 ms) in which a backend of the database waited on a lock.",
    "",
  );
  return lines.join("\n");
}
