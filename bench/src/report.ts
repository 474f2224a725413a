/** The results as JSON and as markdown tables. */
import type { QueryPlan } from "./explain.js";
import { type Measurement, median } from "./load.js";
import type { MemorySample, ServerKind, StoreKind } from "./shared.js";

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  platform: string;
  release: string;
  loadAverageStart: number[];
  loadAverageEnd?: number[];
}

export interface Settings {
  quick: boolean;
  rounds: number;
  durationS: number;
  warmupS: number;
  connections: number;
  memoryStreams: number;
}

export interface ScenarioResult {
  store: StoreKind;
  scenario: string;
  title: string;
  mode: "request" | "stream";
  connections: number;
  /**
   * Set when channelkit was measured against itself (the scenario's reference, e.g. the same
   * stream on a plain channel): `baseline` then holds the reference's rounds, not the
   * baseline server's.
   */
  reference?: string;
  rounds: Record<ServerKind, Measurement[]>;
  median: Record<ServerKind, Summary>;
  /** channelkit ÷ baseline (or ÷ the reference), per metric. */
  ratio: Summary;
}

export interface Summary {
  rps: number;
  p50: number;
  p99: number;
  ttfeP50?: number;
  ttfeP99?: number;
  /** Server CPU µs per request. */
  cpuUs?: number;
}

export interface MemoryRound {
  streams: number;
  opened: number;
  before: MemorySample;
  during: MemorySample;
}

export interface MemoryResult {
  store: StoreKind;
  streams: number;
  rounds: Record<ServerKind, MemoryRound[]>;
  /** Medians over rounds of (during − before) ÷ streams opened, in bytes. */
  perStream: Record<ServerKind, { heapUsed: number; rss: number; external: number }>;
}

export interface Target {
  name: string;
  measured: string;
  met: boolean;
}

export interface Results {
  date: string;
  machine: Machine;
  settings: Settings;
  skipped: string[];
  scenarios: ScenarioResult[];
  memory: MemoryResult[];
  plans: Partial<Record<StoreKind, QueryPlan[]>>;
  targets: Target[];
}

export function summarize(runs: Measurement[]): Summary {
  const summary: Summary = { rps: median(runs.map((r) => r.rps)), p50: median(runs.map((r) => r.p50)), p99: median(runs.map((r) => r.p99)) };
  if (runs.some((r) => r.ttfeP50 !== undefined)) {
    summary.ttfeP50 = median(runs.map((r) => r.ttfeP50 ?? Number.NaN));
    summary.ttfeP99 = median(runs.map((r) => r.ttfeP99 ?? Number.NaN));
  }
  if (runs.some((r) => r.cpuUs !== undefined)) summary.cpuUs = median(runs.map((r) => r.cpuUs ?? Number.NaN));
  return summary;
}

/**
 * channelkit ÷ baseline per metric: the median of the per-round ratios. Each round measures
 * both servers back to back, so a round's ratio is taken under that round's noise; the ratio
 * of two medians could pair a quiet round of one with a busy round of the other.
 */
export function ratioOf(rounds: Record<ServerKind, Measurement[]>): Summary {
  const paired = (pick: (m: Measurement) => number | undefined) =>
    median(
      rounds.channelkit.map((c, i) => {
        const b = rounds.baseline[i];
        const cv = pick(c);
        const bv = b === undefined ? undefined : pick(b);
        return cv === undefined || bv === undefined ? Number.NaN : cv / bv;
      }),
    );
  const ratio: Summary = { rps: paired((m) => m.rps), p50: paired((m) => m.p50), p99: paired((m) => m.p99) };
  if (rounds.channelkit.some((m) => m.ttfeP50 !== undefined)) {
    ratio.ttfeP50 = paired((m) => m.ttfeP50);
    ratio.ttfeP99 = paired((m) => m.ttfeP99);
  }
  if (rounds.channelkit.some((m) => m.cpuUs !== undefined)) ratio.cpuUs = paired((m) => m.cpuUs);
  return ratio;
}

export function memoryPerStream(rounds: MemoryRound[]) {
  const per = (pick: (s: MemorySample) => number) => median(rounds.map((r) => (pick(r.during) - pick(r.before)) / Math.max(1, r.opened)));
  return { heapUsed: per((s) => s.heapUsed), rss: per((s) => s.rss), external: per((s) => s.external + s.arrayBuffers) };
}

const ms = (value: number | undefined) => (value === undefined || !Number.isFinite(value) ? "–" : value < 10 ? value.toFixed(2) : value.toFixed(1));
const rate = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : "–");
const x = (value: number | undefined) => (value === undefined || !Number.isFinite(value) ? "–" : `${value.toFixed(2)}×`);
const us = (value: number | undefined) => (value === undefined || !Number.isFinite(value) ? "–" : Math.round(value).toString());
const kib = (bytes: number) => (Number.isFinite(bytes) ? (bytes / 1024).toFixed(1) : "–");

export function machineLine(machine: Machine): string {
  return `${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB.toFixed(1)} GiB RAM, Node ${machine.node}, ${machine.platform} ${machine.release}; load average at start ${machine.loadAverageStart.map((l) => l.toFixed(2)).join(" / ")}${machine.loadAverageEnd ? `, at end ${machine.loadAverageEnd.map((l) => l.toFixed(2)).join(" / ")}` : ""}`;
}

/** The markdown report. */
export function toMarkdown(results: Results): string {
  const { settings } = results;
  const lines: string[] = [];
  lines.push(`# channelkit benchmark results${settings.quick ? " (quick run: indicative only)" : ""}`, "");
  lines.push(`${results.date}. Machine: ${machineLine(results.machine)}.`, "");
  lines.push(
    `Medians of ${settings.rounds} round${settings.rounds === 1 ? "" : "s"}; in each round the baseline and channelkit are measured one after the other (the order alternates), ${settings.durationS} s each after a ${settings.warmupS} s warm-up, ${settings.connections} connections unless stated. Ratios are channelkit ÷ baseline, the median of the per-round ratios (each taken under that round's noise): above 1 is better for req/s, below 1 is better for latencies. Latencies in ms.`,
    "",
  );
  for (const reason of results.skipped) lines.push(`> ${reason}`, "");

  const requests = results.scenarios.filter((s) => s.mode === "request" && s.reference === undefined);
  if (requests.length > 0) {
    lines.push("## Request/response", "");
    lines.push(
      "| store | scenario | baseline req/s | channelkit req/s | ratio | baseline p50 / p99 | channelkit p50 / p99 | p50 ratio | server CPU µs/req, baseline / channelkit | CPU ratio |",
    );
    lines.push("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const s of requests) {
      const { baseline: b, channelkit: c } = s.median;
      lines.push(
        `| ${s.store} | ${s.title} | ${rate(b.rps)} | ${rate(c.rps)} | ${x(s.ratio.rps)} | ${ms(b.p50)} / ${ms(b.p99)} | ${ms(c.p50)} / ${ms(c.p99)} | ${x(s.ratio.p50)} | ${us(b.cpuUs)} / ${us(c.cpuUs)} | ${x(s.ratio.cpuUs)} |`,
      );
    }
    lines.push("");
  }

  const streams = results.scenarios.filter((s) => s.mode === "stream" && s.reference === undefined);
  if (streams.length > 0) {
    lines.push("## Streaming (time to the first `data:` frame and to the end of the stream)", "");
    lines.push(
      "| store | connections | baseline streams/s | channelkit streams/s | ratio | first event p50 / p99, baseline | first event p50 / p99, channelkit | first event p50 ratio | end p50 / p99, baseline | end p50 / p99, channelkit | server CPU µs/stream, baseline / channelkit | CPU ratio |",
    );
    lines.push("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const s of streams) {
      const { baseline: b, channelkit: c } = s.median;
      lines.push(
        `| ${s.store} | ${s.connections} | ${rate(b.rps)} | ${rate(c.rps)} | ${x(s.ratio.rps)} | ${ms(b.ttfeP50)} / ${ms(b.ttfeP99)} | ${ms(c.ttfeP50)} / ${ms(c.ttfeP99)} | ${x(s.ratio.ttfeP50)} | ${ms(b.p50)} / ${ms(b.p99)} | ${ms(c.p50)} / ${ms(c.p99)} | ${us(b.cpuUs)} / ${us(c.cpuUs)} | ${x(s.ratio.cpuUs)} |`,
      );
    }
    lines.push("");
  }

  const resumable = results.scenarios.filter((s) => s.reference !== undefined);
  if (resumable.length > 0) {
    lines.push("## Resumable streams: channelkit against itself", "");
    lines.push(
      "The same streamed execute (echo flow) on a channel with resumable streams and on one without, on the channelkit server, measured one after the other in each round: what recording a stream costs (docs/streaming.md). Ratios are resumable ÷ plain.",
      "",
    );
    lines.push(
      "| store | connections | plain streams/s | resumable streams/s | ratio | first event p50 / p99, plain | first event p50 / p99, resumable | first event p50 ratio | end p50, plain / resumable | server CPU µs/stream, plain / resumable | CPU ratio |",
    );
    lines.push("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const s of resumable) {
      const { baseline: p, channelkit: r } = s.median;
      lines.push(
        `| ${s.store} | ${s.connections} | ${rate(p.rps)} | ${rate(r.rps)} | ${x(s.ratio.rps)} | ${ms(p.ttfeP50)} / ${ms(p.ttfeP99)} | ${ms(r.ttfeP50)} / ${ms(r.ttfeP99)} | ${x(s.ratio.ttfeP50)} | ${ms(p.p50)} / ${ms(r.p50)} | ${us(p.cpuUs)} / ${us(r.cpuUs)} | ${x(s.ratio.cpuUs)} |`,
      );
    }
    lines.push("");
  }

  const history = historyCosts(results);
  if (history.length > 0) {
    lines.push("## History: 10,000 messages against 100 (channelkit)", "");
    lines.push("| store | query | p50, 100 messages | p50, 10,000 messages | p50 ratio | req/s, 100 | req/s, 10,000 | cost ratio (req/s 100 ÷ 10,000) |");
    lines.push("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const h of history) {
      lines.push(
        `| ${h.store} | ${h.query} | ${ms(h.small.p50)} | ${ms(h.large.p50)} | ${x(h.large.p50 / h.small.p50)} | ${rate(h.small.rps)} | ${rate(h.large.rps)} | ${x(h.small.rps / h.large.rps)} |`,
      );
    }
    lines.push("");
  }

  if (results.memory.length > 0) {
    lines.push("## Memory per open stream", "");
    lines.push(
      "Open streams of the `slow` flow (50 words, 100 ms apart) held by the client; the server's memory after a full GC, before and while they are open, divided by the number of streams.",
      "",
    );
    lines.push("| store | streams | baseline heap / stream | channelkit heap / stream | baseline RSS / stream | channelkit RSS / stream |");
    lines.push("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (const m of results.memory) {
      const b = m.perStream.baseline;
      const c = m.perStream.channelkit;
      lines.push(`| ${m.store} | ${m.streams} | ${kib(b.heapUsed)} KiB | ${kib(c.heapUsed)} KiB | ${kib(b.rss)} KiB | ${kib(c.rss)} KiB |`);
    }
    lines.push("");
  }

  if (results.targets.length > 0) {
    lines.push("## Targets", "");
    lines.push("| target | measured | met |", "| --- | --- | --- |");
    for (const t of results.targets) lines.push(`| ${t.name} | ${t.measured} | ${t.met ? "yes" : "**no**"} |`);
    lines.push("");
  }

  for (const [store, plans] of Object.entries(results.plans)) {
    if (!plans) continue;
    lines.push(`## Query plans on ${store} (channelkit's own statements, captured from its storage)`, "");
    for (const plan of plans) {
      lines.push(
        `- ${plan.operation}${plan.scans ? " — **scan or sort**" : ""}: \`${plan.sql.replace(/\s+/g, " ").slice(0, 160)}${plan.sql.length > 160 ? "…" : ""}\``,
      );
      for (const line of plan.plan.length > 0 ? plan.plan : ["(no table access)"]) lines.push(`  - \`${line.trim()}\``);
    }
    lines.push("");
  }
  return lines.join("\n");
}

export interface HistoryCost {
  store: StoreKind;
  query: string;
  small: Summary;
  large: Summary;
}

export function historyCosts(results: Pick<Results, "scenarios">): HistoryCost[] {
  const out: HistoryCost[] = [];
  for (const store of ["sqlite", "postgres"] as const) {
    for (const [query, small, large] of [
      ["limit=50", "history-100", "history-10k"],
      ["limit=50 + token_budget", "history-100-budget", "history-10k-budget"],
    ] as const) {
      const s = results.scenarios.find((r) => r.store === store && r.scenario === small);
      const l = results.scenarios.find((r) => r.store === store && r.scenario === large);
      if (s && l) out.push({ store, query, small: s.median.channelkit, large: l.median.channelkit });
    }
  }
  return out;
}

/** Evaluates the issue's targets on the medians. */
export function evaluateTargets(results: Omit<Results, "targets">): Target[] {
  const targets: Target[] = [];
  const find = (store: StoreKind, id: string) => results.scenarios.find((s) => s.store === store && s.scenario === id);
  const json = find("sqlite", "execute-json");
  if (json) targets.push({ name: "execute JSON on SQLite ≥ 0.8× the baseline's throughput", measured: x(json.ratio.rps), met: json.ratio.rps >= 0.8 });
  for (const store of ["sqlite", "postgres"] as const) {
    for (const id of ["execute-stream", "execute-stream-1"]) {
      const s = find(store, id);
      if (s?.ratio.ttfeP50 !== undefined) {
        targets.push({
          name: `streaming time to first event ≤ 1.2× the baseline's (${store}, ${s.connections} connection${s.connections === 1 ? "" : "s"}, p50)`,
          measured: `${x(s.ratio.ttfeP50)} (${ms(s.median.channelkit.ttfeP50)} vs ${ms(s.median.baseline.ttfeP50)} ms)`,
          met: s.ratio.ttfeP50 <= 1.2,
        });
      }
    }
  }
  for (const store of ["sqlite", "postgres"] as const) {
    const s = find(store, "resumable-stream");
    if (s) {
      targets.push({
        name: `resumable streams cost < 10% of streams/s (${store}, ${s.connections} connections: resumable ÷ plain ≥ 0.90)`,
        measured: `${x(s.ratio.rps)} (${rate(s.median.channelkit.rps)} vs ${rate(s.median.baseline.rps)} streams/s)`,
        met: s.ratio.rps >= 0.9,
      });
    }
  }
  for (const h of historyCosts(results)) {
    const latency = h.large.p50 / h.small.p50;
    const cost = h.small.rps / h.large.rps;
    targets.push({
      name: `history on 10,000 messages within 2× the cost on 100 (${h.store}, ${h.query})`,
      measured: `p50 ${x(latency)}, throughput ${x(cost)}`,
      met: latency <= 2 && cost <= 2,
    });
  }
  for (const [store, plans] of Object.entries(results.plans)) {
    if (!plans) continue;
    const scanning = plans.filter((p) => p.scans).map((p) => p.operation);
    targets.push({
      name: `no table scan or sort on the request path (${store} query plans)`,
      measured: scanning.length === 0 ? "index lookups only" : `scans: ${scanning.join(", ")}`,
      met: scanning.length === 0,
    });
  }
  for (const m of results.memory) {
    targets.push({
      name: `memory per open stream measured (${m.store})`,
      measured: `channelkit ${kib(m.perStream.channelkit.heapUsed)} KiB heap / ${kib(m.perStream.channelkit.rss)} KiB RSS, baseline ${kib(m.perStream.baseline.heapUsed)} / ${kib(m.perStream.baseline.rss)} KiB`,
      met: Number.isFinite(m.perStream.channelkit.heapUsed),
    });
  }
  return targets;
}
