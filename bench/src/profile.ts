/** Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`): where the server's CPU time went. */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  /** Self time by function. */
  functions: { name: string; selfMs: number; totalMs: number }[];
  /** Self time by package or area (node internals, a dependency, channelkit's packages). */
  areas: { area: string; selfMs: number }[];
}

function areaOf(url: string, name: string): string {
  if (url === "") return name.startsWith("(") ? name : "(native)";
  const dep = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dep) return dep[1] as string;
  const own = /packages\/([^/]+)\/src/.exec(url);
  if (own) return `@channelkit/${own[1]}`;
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[1] === undefined ? url.slice(5) : url.slice(5).split("/").slice(0, 2).join("/")}`;
  if (url.includes("/bench/")) return "bench";
  return url;
}

function shortUrl(url: string): string {
  return url.replace(/^file:\/\/.*?\/(node_modules|packages|bench)\//, "$1/");
}

export function summarizeProfile(path: string, top = 30): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i] as number;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  }
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const key = (node: ProfileNode) => `${node.callFrame.functionName || "(anonymous)"} ${shortUrl(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`;
  const selfByKey = new Map<string, number>();
  const totalByKey = new Map<string, number>();
  const areas = new Map<string, number>();
  let totalMs = 0;
  let idleMs = 0;
  for (const [id, time] of self) {
    const node = byId.get(id) as ProfileNode;
    totalMs += time;
    if (node.callFrame.functionName === "(idle)") idleMs += time;
    selfByKey.set(key(node), (selfByKey.get(key(node)) ?? 0) + time);
    const area = areaOf(node.callFrame.url, node.callFrame.functionName);
    areas.set(area, (areas.get(area) ?? 0) + time);
    // Inclusive time: every distinct function on the stack once.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const k = key(byId.get(at) as ProfileNode);
      if (seen.has(k)) continue;
      seen.add(k);
      totalByKey.set(k, (totalByKey.get(k) ?? 0) + time);
    }
  }
  return {
    totalMs,
    idleMs,
    functions: [...selfByKey]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, selfMs]) => ({ name, selfMs, totalMs: totalByKey.get(name) ?? selfMs })),
    areas: [...areas].sort((a, b) => b[1] - a[1]).map(([area, selfMs]) => ({ area, selfMs })),
  };
}

/** The inclusive time of the functions whose name matches, for questions such as "how much is Kysely?". */
export function inclusiveTimes(path: string, pattern: RegExp, top = 40): { name: string; totalMs: number }[] {
  const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const totals = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const time = (profile.timeDeltas[i] ?? 0) / 1000;
    const seen = new Set<string>();
    for (let at: number | undefined = profile.samples[i]; at !== undefined; at = parent.get(at)) {
      const node = byId.get(at) as ProfileNode;
      const k = `${node.callFrame.functionName || "(anonymous)"} ${shortUrl(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`;
      if (seen.has(k) || !pattern.test(k)) continue;
      seen.add(k);
      totals.set(k, (totals.get(k) ?? 0) + time);
    }
  }
  return [...totals]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, totalMs]) => ({ name, totalMs }));
}

export function printProfile(summary: ProfileSummary, path: string): void {
  const busy = summary.totalMs - summary.idleMs;
  const pct = (value: number) => `${((value / busy) * 100).toFixed(1)}%`.padStart(6);
  console.log(`\nprofile ${path}: ${(busy / 1000).toFixed(1)} s busy of ${(summary.totalMs / 1000).toFixed(1)} s`);
  console.log("\nself time by area:");
  for (const area of summary.areas.slice(0, 20)) console.log(`  ${pct(area.selfMs)}  ${area.area}`);
  console.log("\nself time by function (inclusive in brackets):");
  for (const fn of summary.functions) console.log(`  ${pct(fn.selfMs)} [${pct(fn.totalMs)}]  ${fn.name}`);
}
