/** Server processes: forked with an IPC channel, so the load generator never shares their event loop. */
import { type ChildProcess, fork } from "node:child_process";
import { join } from "node:path";
import type { FloorVariant, MemorySample, OrchestratorMessage, ServerConfig, ServerKind, ServerMessage } from "./shared.js";

export class ServerProcess {
  readonly #child: ChildProcess;
  readonly url: string;
  readonly kind: ServerKind;
  #nextId = 0;

  private constructor(child: ChildProcess, kind: ServerKind, port: number) {
    this.#child = child;
    this.kind = kind;
    this.url = `http://127.0.0.1:${port}`;
  }

  /** Starts `<buildDir>/<kind>-server.mjs` and resolves once it listens. */
  static start(buildDir: string, config: ServerConfig, execArgv: string[] = []): Promise<ServerProcess> {
    return ServerProcess.#fork(join(buildDir, `${config.kind}-server.mjs`), config.kind, { BENCH_SERVER_CONFIG: JSON.stringify(config) }, execArgv);
  }

  /** Starts the floor server (bench/src/floor-server.ts) in one of its variants. */
  static startFloor(buildDir: string, variant: FloorVariant): Promise<ServerProcess> {
    return ServerProcess.#fork(join(buildDir, "floor-server.mjs"), variant === "plain" ? "baseline" : "channelkit", { BENCH_FLOOR: variant }, []);
  }

  static #fork(script: string, kind: ServerKind, env: Record<string, string>, execArgv: string[]): Promise<ServerProcess> {
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

  #ask<Sample>(type: "memory" | "cpu"): Promise<Sample> {
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
