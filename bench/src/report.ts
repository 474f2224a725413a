/** The results as JSON and as markdown tables. */
import type { QueryPlan } from "./explain.js";
import { type Measurement, median } from "./load.js";
import { COMPARISONS, type Comparison, type ForkedKind, type MemorySample, SERVER_KINDS, type Side, type StoreKind } from "./shared.js";

/**
 * The shape of results files: 2 since the servers became several per scenario (rounds by
 * side, `ratios` by comparison); files of format 1 (no `format`) cannot be rerendered.
 */
export const RESULTS_FORMAT = 2;

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
   * stream on a plain channel): the `reference` side holds the reference's rounds.
   */
  reference?: string;
  /** The sides it was measured on. */
  sides: Side[];
  /** Per side, one measurement per round. */
  rounds: Partial<Record<Side, Measurement[]>>;
  median: Partial<Record<Side, Summary>>;
  /** `a/b`: a ÷ b per metric, the median of the per-round ratios; only for pairs both measured. */
  ratios: Partial<Record<Comparison, Summary>>;
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
  rounds: Partial<Record<ForkedKind, MemoryRound[]>>;
  /** Medians over rounds of (during − before) ÷ streams opened, in bytes. */
  perStream: Partial<Record<ForkedKind, PerStream>>;
}

export interface PerStream {
  heapUsed: number;
  rss: number;
  external: number;
}

export interface Target {
  name: string;
  measured: string;
  met: boolean;
}

export interface Results {
  /** {@link RESULTS_FORMAT}; absent in files of the first format. */
  format?: number;
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

/** The medians of each side's rounds. */
export function mediansOf(rounds: Partial<Record<Side, Measurement[]>>): Partial<Record<Side, Summary>> {
  return Object.fromEntries(Object.entries(rounds).map(([side, runs]) => [side, summarize(runs)]));
}

/**
 * a ÷ b per metric for each comparison whose two sides were measured: the median of the
 * per-round ratios. Each round measures every side back to back, so a round's ratio is taken
 * under that round's noise; the ratio of two medians could pair a quiet round of one with a
 * busy round of the other.
 */
export function ratiosOf(rounds: Partial<Record<Side, Measurement[]>>): Partial<Record<Comparison, Summary>> {
  const ratios: Partial<Record<Comparison, Summary>> = {};
  for (const comparison of COMPARISONS) {
    const [a, b] = comparison.split("/") as [Side, Side];
    const over = rounds[a];
    const under = rounds[b];
    if (!over || !under) continue;
    const paired = (pick: (m: Measurement) => number | undefined) =>
      median(
        over.map((m, i) => {
          const u = under[i];
          const mv = pick(m);
          const uv = u === undefined ? undefined : pick(u);
          return mv === undefined || uv === undefined ? Number.NaN : mv / uv;
        }),
      );
    const ratio: Summary = { rps: paired((m) => m.rps), p50: paired((m) => m.p50), p99: paired((m) => m.p99) };
    if (over.some((m) => m.ttfeP50 !== undefined)) {
      ratio.ttfeP50 = paired((m) => m.ttfeP50);
      ratio.ttfeP99 = paired((m) => m.ttfeP99);
    }
    if (over.some((m) => m.cpuUs !== undefined)) ratio.cpuUs = paired((m) => m.cpuUs);
    ratios[comparison] = ratio;
  }
  return ratios;
}

export function memoryPerStream(rounds: MemoryRound[]): PerStream {
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

/** How each server is named in the tables. */
const SERVER_LABEL: Record<Side, string> = {
  baseline: "baseline",
  lean: "lean baseline",
  channelkit: "channelkit (bench embedding)",
  serve: "channelkit serve (CLI)",
  base: "channelkit on the base tree (--base)",
  reference: "reference",
};

/** The sides of a scenario in table order. */
const sidesIn = (s: ScenarioResult) => SERVER_KINDS.filter((kind) => s.median[kind] !== undefined);

/** `req/s ratio (CPU ratio)` of one comparison, or – when it was not measured. */
function pair(ratio: Summary | undefined, metric: "rps" | "ttfeP50" = "rps"): string {
  if (!ratio) return "–";
  return `${x(ratio[metric])} (CPU ${x(ratio.cpuUs)})`;
}

/** The markdown report. */
export function toMarkdown(results: Results): string {
  const { settings } = results;
  const lines: string[] = [];
  lines.push(`# channelkit benchmark results${settings.quick ? " (quick run: indicative only)" : ""}`, "");
  lines.push(`${results.date}. Machine: ${machineLine(results.machine)}.`, "");
  lines.push(
    `Medians of ${settings.rounds} round${settings.rounds === 1 ? "" : "s"}; in each round each scenario is measured on each server that answers it, one after the other in an order that rotates each round, ${settings.durationS} s each after a ${settings.warmupS} s warm-up, ${settings.connections} connections unless stated. The servers: the **baseline** (bench/src/baseline-server.ts, every check of the contract, by hand on node:http and the driver), the **lean** baseline (bench/src/lean-server.ts, the afternoon handler: execute and history only), **channelkit** as the bench embeds it (bench/src/channelkit-server.ts, the sources), **channelkit serve**, the built CLI as users run it (every plugin it mounts, default rate limits and drain), and, with --base DIR, **base**: the same embedding on another checkout's sources. Ratios are a ÷ b, the median of the per-round ratios (each taken under that round's noise): above 1 is better for req/s, below 1 is better for latencies and CPU. Server CPU is per request (user + system µs of the server process: process.cpuUsage() over IPC, /proc/<pid>/stat for serve). Latencies in ms.`,
    "",
  );
  for (const reason of results.skipped) lines.push(`> ${reason}`, "");

  const requests = results.scenarios.filter((s) => s.mode === "request" && s.reference === undefined);
  const streams = results.scenarios.filter((s) => s.mode === "stream" && s.reference === undefined);
  const measured = [...requests, ...streams];
  if (measured.length > 0) {
    lines.push("## Ratios", "");
    lines.push(
      "Throughput ratio (server CPU per request ratio in parentheses); for streams, the time to the first event ratio is in the streaming table. Webhook and widget scenarios are against the baseline's own routes for them.",
      "",
    );
    const withBase = measured.some((s) => s.ratios["channelkit/base"] !== undefined);
    lines.push(
      `| store | scenario | channelkit ÷ baseline | channelkit ÷ lean | serve ÷ baseline | serve ÷ lean |${withBase ? " channelkit ÷ base (first event p50) | base ÷ lean |" : ""}`,
      `| --- | --- | ---: | ---: | ---: | ---: |${withBase ? " ---: | ---: |" : ""}`,
    );
    for (const s of measured) {
      const r = s.ratios;
      const base = r["channelkit/base"];
      const baseColumns = withBase ? ` ${pair(base)}${base?.ttfeP50 === undefined ? "" : ` (${x(base.ttfeP50)})`} | ${pair(r["base/lean"])} |` : "";
      lines.push(
        `| ${s.store} | ${s.title} | ${pair(r["channelkit/baseline"])} | ${pair(r["channelkit/lean"])} | ${pair(r["serve/baseline"])} | ${pair(r["serve/lean"])} |${baseColumns}`,
      );
    }
    lines.push("");
  }

  if (requests.length > 0) {
    lines.push("## Request/response", "");
    lines.push(
      "| store | scenario | server | req/s | p50 / p99 | server CPU µs/req | ÷ baseline: req/s, CPU | ÷ lean: req/s, CPU |",
      "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    );
    for (const s of requests) {
      for (const side of sidesIn(s)) {
        const m = s.median[side] as Summary;
        const over = (b: "baseline" | "lean") => {
          const r = s.ratios[`${side}/${b}` as Comparison];
          return r ? `${x(r.rps)}, ${x(r.cpuUs)}` : "–";
        };
        lines.push(
          `| ${s.store} | ${s.title} | ${SERVER_LABEL[side]} | ${rate(m.rps)} | ${ms(m.p50)} / ${ms(m.p99)} | ${us(m.cpuUs)} | ${over("baseline")} | ${over("lean")} |`,
        );
      }
    }
    lines.push("");
  }

  if (streams.length > 0) {
    lines.push("## Streaming (time to the first `data:` frame and to the end of the stream)", "");
    lines.push(
      "| store | scenario | connections | server | streams/s | first event p50 / p99 | end p50 / p99 | server CPU µs/stream | ÷ baseline: streams/s, first event p50, CPU | ÷ lean: streams/s, first event p50, CPU |",
      "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    );
    for (const s of streams) {
      for (const side of sidesIn(s)) {
        const m = s.median[side] as Summary;
        const over = (b: "baseline" | "lean") => {
          const r = s.ratios[`${side}/${b}` as Comparison];
          return r ? `${x(r.rps)}, ${x(r.ttfeP50)}, ${x(r.cpuUs)}` : "–";
        };
        lines.push(
          `| ${s.store} | ${s.title} | ${s.connections} | ${SERVER_LABEL[side]} | ${rate(m.rps)} | ${ms(m.ttfeP50)} / ${ms(m.ttfeP99)} | ${ms(m.p50)} / ${ms(m.p99)} | ${us(m.cpuUs)} | ${over("baseline")} | ${over("lean")} |`,
        );
      }
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
      const p = s.median.reference;
      const r = s.median.channelkit;
      const ratio = s.ratios["channelkit/reference"];
      if (!p || !r || !ratio) continue;
      lines.push(
        `| ${s.store} | ${s.connections} | ${rate(p.rps)} | ${rate(r.rps)} | ${x(ratio.rps)} | ${ms(p.ttfeP50)} / ${ms(p.ttfeP99)} | ${ms(r.ttfeP50)} / ${ms(r.ttfeP99)} | ${x(ratio.ttfeP50)} | ${ms(p.p50)} / ${ms(r.p50)} | ${us(p.cpuUs)} / ${us(r.cpuUs)} | ${x(ratio.cpuUs)} |`,
      );
    }
    lines.push("");
  }

  const history = historyCosts(results);
  if (history.length > 0) {
    lines.push("## History: 10,000 messages against 100", "");
    lines.push(
      "| store | server | query | p50, 100 messages | p50, 10,000 messages | p50 ratio | req/s, 100 | req/s, 10,000 | cost ratio (req/s 100 ÷ 10,000) |",
      "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    );
    for (const h of history) {
      lines.push(
        `| ${h.store} | ${SERVER_LABEL[h.side]} | ${h.query} | ${ms(h.small.p50)} | ${ms(h.large.p50)} | ${x(h.large.p50 / h.small.p50)} | ${rate(h.small.rps)} | ${rate(h.large.rps)} | ${x(h.small.rps / h.large.rps)} |`,
      );
    }
    lines.push("");
  }

  if (results.memory.length > 0) {
    lines.push("## Memory per open stream", "");
    lines.push(
      "Open streams of the `slow` flow (50 words, 100 ms apart) held by the client; the server's memory after a full GC, before and while they are open, divided by the number of streams. Measured on the forked servers (the baseline and channelkit's embedding), each in a process started for it.",
      "",
    );
    lines.push("| store | streams | server | heap / stream | RSS / stream |", "| --- | ---: | --- | ---: | ---: |");
    for (const m of results.memory) {
      for (const [kind, per] of Object.entries(m.perStream) as [ForkedKind, PerStream][]) {
        lines.push(`| ${m.store} | ${m.streams} | ${SERVER_LABEL[kind]} | ${kib(per.heapUsed)} KiB | ${kib(per.rss)} KiB |`);
      }
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
  side: "channelkit" | "serve";
  query: string;
  small: Summary;
  large: Summary;
}

/** History on 10,000 messages against 100, for channelkit and serve, where both were measured. */
export function historyCosts(results: Pick<Results, "scenarios">): HistoryCost[] {
  const out: HistoryCost[] = [];
  for (const store of ["sqlite", "postgres"] as const) {
    for (const side of ["channelkit", "serve"] as const) {
      for (const [query, small, large] of [
        ["limit=50", "history-100", "history-10k"],
        ["limit=50 + token_budget", "history-100-budget", "history-10k-budget"],
      ] as const) {
        const s = results.scenarios.find((r) => r.store === store && r.scenario === small)?.median[side];
        const l = results.scenarios.find((r) => r.store === store && r.scenario === large)?.median[side];
        if (s && l) out.push({ store, side, query, small: s, large: l });
      }
    }
  }
  return out;
}

/** The two channelkit servers the targets are about, and the two yardsticks. */
const MEASURED = ["channelkit", "serve"] as const;
const YARDSTICKS = ["baseline", "lean"] as const;
const connectionsOf = (n: number) => `${n} connection${n === 1 ? "" : "s"}`;

/**
 * Evaluates issue 22's targets on the medians and the paired ratios, for channelkit's
 * embedding and for `channelkit serve`, against each baseline measured: execute JSON ≥ 1.0×
 * the req/s with server CPU ≤ 1.0× on each store; the first event of a stream ≤ 1.1× at 1
 * and 16 connections; heap per open stream ≤ 1.2×; history on 10,000 messages ≥ 1.0× and
 * within 1.2× of the cost on 100; webhook newMessage and widget chat ≥ 0.9× their own
 * baseline. Then the standing checks: no scan in the query plans, resumable streams.
 * (Database round trips per execute on Postgres are counted by a test, not here.)
 */
export function evaluateTargets(results: Omit<Results, "targets">): Target[] {
  const targets: Target[] = [];
  const find = (store: StoreKind, id: string) => results.scenarios.find((s) => s.store === store && s.scenario === id);
  const label = (side: Side) => (side === "serve" ? "channelkit serve" : side === "channelkit" ? "channelkit" : side);
  for (const store of ["sqlite", "postgres"] as const) {
    const s = find(store, "execute-json");
    for (const side of MEASURED) {
      for (const base of YARDSTICKS) {
        const ratio = s?.ratios[`${side}/${base}`];
        if (!s || !ratio) continue;
        targets.push({
          name: `execute JSON (${store}, ${connectionsOf(s.connections)}): ${label(side)} ≥ 1.0× the ${base === "lean" ? "lean baseline" : "baseline"}'s req/s, server CPU ≤ 1.0×`,
          measured: `${x(ratio.rps)} req/s (${rate(s.median[side]?.rps ?? Number.NaN)} vs ${rate(s.median[base]?.rps ?? Number.NaN)}), CPU ${x(ratio.cpuUs)} (${us(s.median[side]?.cpuUs)} vs ${us(s.median[base]?.cpuUs)} µs)`,
          met: ratio.rps >= 1 && (ratio.cpuUs ?? Number.POSITIVE_INFINITY) <= 1,
        });
      }
    }
  }
  for (const store of ["sqlite", "postgres"] as const) {
    for (const id of ["execute-stream-1", "execute-stream"]) {
      const s = find(store, id);
      for (const side of MEASURED) {
        for (const base of YARDSTICKS) {
          const ratio = s?.ratios[`${side}/${base}`];
          if (!s || ratio?.ttfeP50 === undefined) continue;
          targets.push({
            name: `streamed execute, time to first event (${store}, ${connectionsOf(s.connections)}, p50): ${label(side)} ≤ 1.1× the ${base === "lean" ? "lean baseline" : "baseline"}'s`,
            measured: `${x(ratio.ttfeP50)} (${ms(s.median[side]?.ttfeP50)} vs ${ms(s.median[base]?.ttfeP50)} ms)`,
            met: ratio.ttfeP50 <= 1.1,
          });
        }
      }
    }
  }
  for (const m of results.memory) {
    const c = m.perStream.channelkit;
    const b = m.perStream.baseline;
    if (!c || !b) continue;
    const ratio = c.heapUsed / b.heapUsed;
    targets.push({
      name: `memory per open stream (${m.store}, ${m.streams} streams): channelkit's heap ≤ 1.2× the baseline's`,
      measured: `${x(ratio)} (${kib(c.heapUsed)} vs ${kib(b.heapUsed)} KiB heap; RSS ${kib(c.rss)} vs ${kib(b.rss)} KiB)`,
      met: ratio <= 1.2,
    });
  }
  for (const store of ["sqlite", "postgres"] as const) {
    const s = find(store, "history-10k");
    for (const side of MEASURED) {
      const ratio = s?.ratios[`${side}/baseline`];
      const cost = historyCosts(results).find((h) => h.store === store && h.side === side && h.query === "limit=50");
      if (!s || !ratio || !cost) continue;
      const ofSmall = cost.small.rps / cost.large.rps;
      targets.push({
        name: `history limit=50 on 10,000 messages (${store}): ${label(side)} ≥ 1.0× the baseline's req/s, and its cost within 1.2× of the cost on 100 messages`,
        measured: `${x(ratio.rps)} the baseline's (CPU ${x(ratio.cpuUs)}); cost ${x(ofSmall)} the 100-message one (req/s ${rate(cost.small.rps)} on 100, ${rate(cost.large.rps)} on 10,000)`,
        met: ratio.rps >= 1 && ofSmall <= 1.2,
      });
    }
  }
  for (const store of ["sqlite", "postgres"] as const) {
    for (const id of ["history-100", "history-10k"]) {
      const s = find(store, id);
      for (const side of MEASURED) {
        const ratio = s?.ratios[`${side}/lean`];
        if (!s || !ratio) continue;
        targets.push({
          name: `history limit=50, ${id === "history-100" ? "100" : "10,000"} messages (${store}): ${label(side)} ≥ 0.9× the lean baseline's req/s (issue 42)`,
          measured: `${x(ratio.rps)} (${rate(s.median[side]?.rps ?? Number.NaN)} vs ${rate(s.median.lean?.rps ?? Number.NaN)}), CPU ${x(ratio.cpuUs)}`,
          met: ratio.rps >= 0.9,
        });
      }
    }
  }
  for (const store of ["sqlite", "postgres"] as const) {
    for (const id of ["webhook-new-message", "widget-chat"]) {
      const s = find(store, id);
      for (const side of MEASURED) {
        const ratio = s?.ratios[`${side}/baseline`];
        if (!s || !ratio) continue;
        targets.push({
          name: `${id === "widget-chat" ? "widget chat" : "webhook newMessage"} (${store}): ${label(side)} ≥ 0.9× its own baseline's ${s.mode === "stream" ? "streams/s" : "req/s"}`,
          measured: `${x(ratio.rps)} (${rate(s.median[side]?.rps ?? Number.NaN)} vs ${rate(s.median.baseline?.rps ?? Number.NaN)}), CPU ${x(ratio.cpuUs)}${ratio.ttfeP50 === undefined ? "" : `, first event ${x(ratio.ttfeP50)}`}`,
          met: ratio.rps >= 0.9,
        });
      }
    }
  }
  for (const store of ["sqlite", "postgres"] as const) {
    for (const id of ["execute-json", "execute-stream", "execute-stream-1"]) {
      const s = find(store, id);
      const ratio = s?.ratios["channelkit/base"];
      if (!s || !ratio) continue;
      const first = s.mode === "stream";
      const value = first ? (ratio.ttfeP50 ?? Number.NaN) : ratio.rps;
      targets.push({
        name: `${first ? "first event p50" : "execute JSON req/s"} (${store}, ${connectionsOf(s.connections)}): channelkit within 3% of the base tree's (${first ? "≤ 1.03×" : "≥ 0.97×"})`,
        measured: first
          ? `${x(value)} (${ms(s.median.channelkit?.ttfeP50)} vs ${ms(s.median.base?.ttfeP50)} ms)`
          : `${x(value)} (${rate(s.median.channelkit?.rps ?? Number.NaN)} vs ${rate(s.median.base?.rps ?? Number.NaN)}), CPU ${x(ratio.cpuUs)}`,
        met: first ? value <= 1.03 : value >= 0.97,
      });
    }
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
  for (const store of ["sqlite", "postgres"] as const) {
    for (const s of [find(store, "resumable-stream"), find(store, "resumable-stream-1")]) {
      const ratio = s?.ratios["channelkit/reference"];
      if (!s || !ratio) continue;
      targets.push({
        name: `resumable streams cost < 10% of streams/s (${store}, ${s.connections} connections: resumable ÷ plain ≥ 0.90)`,
        measured: `${x(ratio.rps)} (${rate(s.median.channelkit?.rps ?? Number.NaN)} vs ${rate(s.median.reference?.rps ?? Number.NaN)} streams/s)`,
        met: ratio.rps >= 0.9,
      });
    }
  }
  return targets;
}
