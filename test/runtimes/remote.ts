import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChannelAdmin, Storage } from "@channelkit/core";
import {
  type ContractSuiteOptions,
  type ContractTarget,
  type ContractTargetOptions,
  createTestDatabase,
  defineContractSuite,
  describeWithPostgres,
  type RunningTarget,
} from "@channelkit/testkit";
import { ADMIN_JWT_SECRET, CONTROL_HEADER, CONTROL_PATH, type ControlCall, type TargetOptions } from "./service.js";

/** A test server as a runtime runs it: its URL, and how to stop it. */
export interface RemoteServer {
  url: string;
  stop(): Promise<void>;
}

/** Options of {@link remoteTarget}. */
export interface RemoteTargetOptions {
  name: string;
  /**
   * Starts a server in front of a fresh database with the suite's options (JSON) and the
   * control token its control route must require; `dispose` runs after it stopped.
   */
  start(options: TargetOptions, controlToken: string): Promise<RemoteServer & { dispose?(): Promise<void> }>;
}

/**
 * A contract target served by another runtime (Bun, Deno, workerd): the suite talks to it
 * over HTTP only. Its `admin` and `storage` are proxies whose calls go to the server's
 * control route (service.ts), so the suite provisions tenants and channels, and reads stored
 * runs back, in the server's own process and database.
 */
export function remoteTarget({ name, start }: RemoteTargetOptions): ContractTarget {
  return {
    name,
    async start(options: ContractTargetOptions): Promise<RunningTarget> {
      const token = randomBytes(16).toString("hex");
      const server = await start(options as TargetOptions, token);
      const call = async (target: ControlCall["target"], method: string, args: unknown[]) => {
        const response = await fetch(server.url + CONTROL_PATH, {
          method: "POST",
          headers: { "content-type": "application/json", [CONTROL_HEADER]: token },
          body: JSON.stringify({ target, method, args } satisfies ControlCall),
        });
        if (!response.ok) throw new Error(`control ${target}.${method}: HTTP ${response.status} ${await response.text()}`);
        const answer = (await response.json()) as { ok: true; value: unknown } | { ok: false; error: { name?: string; message?: string; code?: unknown } };
        if (!answer.ok) throw Object.assign(new Error(answer.error.message ?? "control call failed"), answer.error);
        return answer.value;
      };
      const proxy = (target: "admin" | "storage") =>
        new Proxy(
          {},
          {
            // `then` is looked up by `await`: the proxy is not a promise.
            get: (_, method) => (method === "then" || typeof method !== "string" ? undefined : (...args: unknown[]) => call(target, method, args)),
          },
        );
      return {
        url: server.url,
        admin: proxy("admin") as ChannelAdmin,
        adminJwtSecret: ADMIN_JWT_SECRET,
        storage: proxy("storage") as Storage,
        expireApiKeys: async (channelId) => void (await call("expireApiKeys", "", [channelId])),
        async close() {
          await server.stop();
          await server.dispose?.();
        },
      };
    },
  };
}

/**
 * Spawns `command` with `env` added, and resolves with the URL once it prints
 * `listening on <url>` (its output is kept for the error when it does not in `timeoutMs`).
 * `stop` sends SIGTERM, then SIGKILL after 5 s.
 */
export async function spawnServer(command: string, args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<RemoteServer> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${command} ${args.join(" ")} did not print "listening on" in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const found = output.match(/listening on (http:\/\/\S+)/);
      if (found) {
        clearTimeout(timer);
        resolve(found[1] as string);
      }
    };
    child.stdout?.on("data", read);
    child.stderr?.on("data", read);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${command} ${args.join(" ")} exited (${code ?? signal}) before it listened:\n${output}`));
    });
  });
  return { url, stop: () => stopChild(child, exited) };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
}

/**
 * The contract suite against a runtime's test server, `command args`, twice: on a SQLite file
 * of the runtime's own driver, and on Postgres (a new database on the test server). The
 * server reads the database location, the suite's options and the control token from its
 * environment (see bun-server.ts).
 */
/** The groups the suite cannot run against another runtime's server. */
const NOT_REMOTE = {
  "leaving clients": "the suite holds a service at a point of a request through its storage, which it cannot wrap in another runtime's process",
} satisfies ContractSuiteOptions["omit"];

export function defineRuntimeSuites(name: string, command: string, args: string[], sqlite: string): void {
  const env = (db: string, options: TargetOptions, token: string) => ({
    CHANNELKIT_TEST_DB: db,
    CHANNELKIT_TEST_OPTIONS: JSON.stringify(options),
    CHANNELKIT_TEST_CONTROL: token,
  });
  defineContractSuite(
    remoteTarget({
      name: `${name} + ${sqlite}`,
      async start(options, token) {
        const dir = await mkdtemp(join(tmpdir(), "channelkit-runtime-"));
        const server = await spawnServer(command, args, env(join(dir, "contract.db"), options, token));
        return { ...server, dispose: () => rm(dir, { recursive: true, force: true }) };
      },
    }),
    { omit: NOT_REMOTE },
  );
  describeWithPostgres("Postgres", (serverUrl) => {
    defineContractSuite(
      remoteTarget({
        name: `${name} + Postgres`,
        async start(options, token) {
          const database = await createTestDatabase(serverUrl);
          const server = await spawnServer(command, args, env(database.url, options, token));
          return { ...server, dispose: () => database.drop() };
        },
      }),
      { omit: NOT_REMOTE },
    );
  });
}
