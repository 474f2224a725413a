/**
 * Server processes, each in its own process so the load generator never shares their event
 * loop: the bench's servers are forked with an IPC channel (memory, CPU, stop); `channelkit
 * serve` is the built CLI, spawned as users run it, its CPU read from /proc.
 */
import { type ChildProcess, execFileSync, fork, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { platform, tmpdir } from "node:os";
import { join } from "node:path";
import {
  BENCH_SECRET_KEY,
  type FloorVariant,
  type ForkedKind,
  type LockWaits,
  type MemorySample,
  type OrchestratorMessage,
  type ServerConfig,
  type ServerKind,
  type ServerMessage,
} from "./shared.js";

/** What the orchestrator needs of any measured server. */
export interface BenchServer {
  readonly kind: ServerKind;
  readonly url: string;
  /** The CPU time the server process has used so far (user and system, µs). */
  cpu(): Promise<NodeJS.CpuUsage>;
  stop(): Promise<void>;
}

export class ServerProcess implements BenchServer {
  readonly #child: ChildProcess;
  readonly url: string;
  readonly kind: ForkedKind;
  #nextId = 0;

  private constructor(child: ChildProcess, kind: ForkedKind, port: number) {
    this.#child = child;
    this.kind = kind;
    this.url = `http://127.0.0.1:${port}`;
  }

  /**
   * Starts `<buildDir>/<kind>-server.mjs` and resolves once it listens; `base`, the channelkit
   * server bundled on another checkout's sources by bench.mjs (`--base DIR`), from where it was bundled.
   */
  static start(buildDir: string, config: ServerConfig, execArgv: string[] = []): Promise<ServerProcess> {
    const script = config.kind === "base" ? baseServerScript() : join(buildDir, `${config.kind}-server.mjs`);
    if (!script) throw new Error("bench: no base server: run the bench with --base DIR");
    return ServerProcess.#fork(script, config.kind, { BENCH_SERVER_CONFIG: JSON.stringify(config) }, execArgv);
  }

  /** Starts the floor server (bench/src/floor-server.ts) in one of its variants. */
  static startFloor(buildDir: string, variant: FloorVariant): Promise<ServerProcess> {
    return ServerProcess.#fork(join(buildDir, "floor-server.mjs"), variant === "plain" ? "baseline" : "channelkit", { BENCH_FLOOR: variant }, []);
  }

  static #fork(script: string, kind: ForkedKind, env: Record<string, string>, execArgv: string[]): Promise<ServerProcess> {
    const child = fork(script, [], {
      env: { ...process.env, ...env, NODE_ENV: "production" },
      execArgv: ["--expose-gc", ...execArgv],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`bench: the ${kind} server exited (${code}) before listening`));
      child.once("exit", onExit);
      child.once("error", reject);
      child.on("message", function ready(message: ServerMessage) {
        if (message.type !== "ready") return;
        child.off("message", ready);
        child.off("exit", onExit);
        resolve(new ServerProcess(child, kind, message.port));
      });
    });
  }

  /** The server's memory after a full collection. */
  memory(): Promise<MemorySample> {
    return this.#ask<MemorySample>("memory");
  }

  /** The CPU time the server process has used so far (user and system, µs). */
  cpu(): Promise<NodeJS.CpuUsage> {
    return this.#ask<NodeJS.CpuUsage>("cpu");
  }

  /** How long the server waited for SQLite's write lock so far (zeros on Postgres). */
  locks(): Promise<LockWaits> {
    return this.#ask<LockWaits>("locks");
  }

  #ask<Sample>(type: "memory" | "cpu" | "locks"): Promise<Sample> {
    const id = ++this.#nextId;
    return new Promise((resolve) => {
      const onMessage = (message: ServerMessage) => {
        if (message.type === type && message.id === id) {
          this.#child.off("message", onMessage);
          resolve(message.usage as Sample);
        }
      };
      this.#child.on("message", onMessage);
      this.#send({ type, id });
    });
  }

  /** Asks the server to close and waits for the process to exit (a --cpu-prof profile is then written). */
  stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#child.kill("SIGKILL"), 15_000);
      this.#child.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      this.#send({ type: "stop" });
    });
  }

  #send(message: OrchestratorMessage): void {
    this.#child.send(message);
  }
}

/** The channelkit server bundled on the `--base` tree's sources (bench.mjs), when one was given. */
export function baseServerScript(): string | undefined {
  return process.env.BENCH_BASE_SERVER;
}

/** The CLI's entry, built by `npm run build`. */
export function cliBinary(root: string): string {
  return join(root, "packages/cli/dist/bin.js");
}

/** Why `channelkit serve` cannot be measured here, or null when it can. */
export function serveUnavailable(root: string): string | null {
  if (platform() !== "linux") return `channelkit serve not measured: its CPU is read from /proc/<pid>/stat, which ${platform()} has not`;
  if (!existsSync(cliBinary(root))) return "channelkit serve not measured: packages/cli/dist/bin.js is missing (run npm run build first)";
  return null;
}

/** The newest modification time under `dir`, files only (0 when there is none). */
function newest(dir: string, test: (name: string) => boolean): number {
  if (!existsSync(dir)) return 0;
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && test(entry.name)) latest = Math.max(latest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return latest;
}

/**
 * A warning when a package `channelkit serve` runs from dist/ is older than its sources: the
 * bench's channelkit server runs the sources, serve the last build.
 */
export function staleBuild(root: string): string | null {
  const stale = ["core", "kysely", "node", "widget", "cli"].filter((name) => {
    const pkg = join(root, "packages", name);
    const built = newest(join(pkg, "dist"), (f) => f.endsWith(".js"));
    return built > 0 && newest(join(pkg, "src"), (f) => f.endsWith(".ts") && !f.includes(".test.")) > built;
  });
  return stale.length === 0
    ? null
    : `channelkit serve runs the built packages, and dist/ is older than src/ in ${stale.join(", ")}: it measures the last \`npm run build\`, the bench's channelkit server the working tree`;
}

let clockTicks: number | undefined;
/** `getconf CLK_TCK`: the unit of utime and stime in /proc/<pid>/stat. */
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/**
 * `channelkit serve` as users run it: `node packages/cli/dist/bin.js serve --port 0 --host
 * 127.0.0.1 --db <seeded database>`, in an empty working directory (no config file is found,
 * so it serves the demo flows with every plugin the command mounts: the admin routes, the
 * live-chat inbox, the widget's script; default rate limits and drain), with the bench's
 * master key in CHANNELKIT_SECRET_KEY (signed channels open their secrets) and an admin JWT
 * secret, as in production. It has no IPC channel: its CPU time is read from /proc/<pid>/stat
 * (utime + stime, in clock ticks of 10 ms: a second of load at 2,000 req/s is read to ~1%).
 */
export class CliServer implements BenchServer {
  readonly kind = "serve" as const;
  readonly #child: ChildProcess;
  readonly #cwd: string;
  readonly url: string;

  private constructor(child: ChildProcess, cwd: string, url: string) {
    this.#child = child;
    this.#cwd = cwd;
    this.url = url;
  }

  /** The command line, for the report. */
  static commandLine(location: string): string {
    return `node packages/cli/dist/bin.js serve --port 0 --host 127.0.0.1 --db ${location.startsWith("postgres") ? "<postgres URL>" : "<seeded SQLite file>"}`;
  }

  static start(root: string, location: string): Promise<CliServer> {
    const cwd = mkdtempSync(join(tmpdir(), "channelkit-bench-serve-"));
    const child = spawn(process.execPath, [cliBinary(root), "serve", "--port", "0", "--host", "127.0.0.1", "--db", location], {
      cwd,
      env: {
        ...process.env,
        NODE_ENV: "production",
        CHANNELKIT_SECRET_KEY: BENCH_SECRET_KEY,
        CHANNELKIT_ADMIN_JWT_SECRET: "channelkit-bench-admin-secret-0123456789abcdef",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`bench: channelkit serve did not listen in 30 s:\n${output}`));
      }, 30_000);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`bench: channelkit serve exited (${code}) before listening:\n${output}`));
      });
      child.stderr?.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        process.stderr.write(`[serve] ${chunk}`);
      });
      child.stdout?.on("data", function read(chunk: Buffer) {
        output += chunk.toString();
        const found = /listening on (http:\/\/\S+)/.exec(output);
        if (!found) return;
        clearTimeout(timer);
        child.stdout?.off("data", read);
        child.stdout?.resume();
        child.removeAllListeners("exit");
        resolve(new CliServer(child, cwd, found[1] as string));
      });
    });
  }

  async cpu(): Promise<NodeJS.CpuUsage> {
    // Fields 14 and 15 (utime, stime) of /proc/<pid>/stat, counted after the command's name,
    // which is in parentheses and may hold spaces.
    const stat = readFileSync(`/proc/${this.#child.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const us = 1e6 / ticksPerSecond();
    return { user: Number(fields[11]) * us, system: Number(fields[12]) * us };
  }

  /** SIGTERM, as an orchestrator stops it (it drains, here with nothing in flight). */
  stop(): Promise<void> {
    const done = () => rmSync(this.#cwd, { recursive: true, force: true });
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return Promise.resolve(done());
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#child.kill("SIGKILL"), 20_000);
      this.#child.once("exit", () => {
        clearTimeout(timer);
        done();
        resolve();
      });
      this.#child.kill("SIGTERM");
    });
  }
}
