/**
 * Test helpers that run the built `channelkit` binary (packages/cli/dist/bin.js) as real
 * processes: build it when stale, run one command, start `serve` and wait for its
 * `listening on` line, and kill whatever was started. Not part of the package (tsup only
 * bundles src/index.ts and src/bin.ts).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The monorepo's root. */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The built command. */
const BIN = join(ROOT, "packages/cli/dist/bin.js");

/** The packages the binary runs on, in build order. */
const BUILT_PACKAGES = ["core", "kysely", "node", "widget", "chat", "cli"];

/** True when a package's dist is missing or older than one of its sources (tests and test helpers aside). */
function stale(pkg: string): boolean {
  const dist = join(ROOT, "packages", pkg, "dist");
  if (!existsSync(dist)) return true;
  const outputs = readdirSync(dist).filter((f) => f.endsWith(".js"));
  if (outputs.length === 0) return true;
  const built = Math.min(...outputs.map((f) => statSync(join(dist, f)).mtimeMs));
  const src = join(ROOT, "packages", pkg, "src");
  const sources = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts") && !/(\.test|(^|\/)test-[^/]*)\.ts$/.test(f));
  return sources.some((f) => statSync(join(src, f)).mtimeMs > built);
}

/**
 * Builds the binary and what it imports when a source is newer than its dist: `npm test`
 * builds first, a direct `vitest run` after a source change builds here. Test files run in
 * parallel workers, so the check and the build happen under a lock directory: a worker never
 * spawns the binary while another one's build has cleaned `dist`.
 */
export async function ensureBuilt(): Promise<void> {
  const lock = join(ROOT, "node_modules", ".channelkit-test-build.lock");
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    // Another worker holds it; a lock left by a killed run is dropped after three minutes.
    const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
    if (age > 180_000) rmSync(lock, { recursive: true, force: true });
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  try {
    if (BUILT_PACKAGES.some(stale)) {
      execFileSync("npm", ["run", "build", ...BUILT_PACKAGES.flatMap((p) => ["-w", `@channelkit/${p}`])], { cwd: ROOT, stdio: "ignore" });
    }
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Every process started here and not yet exited, killed by {@link killAll} or on exit. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** The environment of a child: this process's, without what would redirect the command, plus `extra`. */
function childEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CHANNELKIT_DB;
  delete env.PORT;
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/** Where a command runs: the monorepo's root unless `cwd` says otherwise (an app with a config file). */
export interface StartOptions {
  cwd?: string;
}

function start(args: string[], env: Record<string, string | undefined>, options: StartOptions = {}): { child: ChildProcess; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: options.cwd ?? ROOT, env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  const exited = new Promise<number | null>((resolve) => {
    child.once("error", () => resolve(null));
    child.once("exit", (code) => {
      running.delete(child);
      resolve(code);
    });
  });
  return { child, exited };
}

/** The outcome of one `channelkit` command run to its end. */
interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `channelkit ...args` as its own process and waits for it to end. */
export async function runCli(args: string[], env: Record<string, string | undefined> = {}, options: StartOptions = {}): Promise<CliResult> {
  const { child } = start(args, env, options);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  // "close" comes once the process has exited and its output is drained ("exit" may come first).
  const code = await new Promise<number | null>((resolve) => {
    child.once("error", () => resolve(null));
    child.once("close", (exitCode) => resolve(exitCode));
  });
  return { code, stdout, stderr };
}

/** Runs a command that must succeed and returns the one JSON document it prints. */
export async function runCliJson<T = any>(args: string[], env: Record<string, string | undefined> = {}, options: StartOptions = {}): Promise<T> {
  const result = await runCli(args, env, options);
  if (result.code !== 0) throw new Error(`channelkit ${args.join(" ")} exited with ${result.code}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

/** A running `channelkit serve`. */
export interface ServeProcess {
  /** `http://HOST:PORT` from its `listening on` line. */
  url: string;
  child: ChildProcess;
  /** Every stdout line so far, the `listening on` line included. */
  lines: string[];
  stderr(): string;
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>;
}

/**
 * Starts `channelkit serve ...args` and resolves once it printed `listening on URL`. Rejects
 * (and kills the process) when it exits first or prints nothing within `timeoutMs`.
 */
export async function startServe(
  args: string[],
  env: Record<string, string | undefined> = {},
  timeoutMs = 15_000,
  options: StartOptions = {},
): Promise<ServeProcess> {
  const { child, exited } = start(["serve", ...args], env, options);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const reader = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      reader.on("line", (line) => {
        lines.push(line);
        const match = /^listening on (http:\/\/\S+)$/.exec(line);
        if (match) resolve(match[1] as string);
      });
      void exited.then((code) => reject(new Error(`channelkit serve exited with ${code}: ${stderr}`)));
      timer = setTimeout(() => reject(new Error(`no "listening on" line within ${timeoutMs} ms: ${lines.join("\n")}\n${stderr}`)), timeoutMs);
    });
    return { url, child, lines, stderr: () => stderr, exited };
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Kills every process started here that is still running, and waits until they are gone. */
export async function killAll(): Promise<void> {
  await Promise.all(
    [...running].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGKILL");
        }),
    ),
  );
}

/** An app made by {@link makeApp}. */
export interface TestApp {
  /** Its directory. */
  path: string;
  /** Removes the directory and everything in it. */
  remove(): Promise<void>;
}

/**
 * A new app in a temporary directory, with these files (paths relative to it) and a
 * `package.json` of type module: its `node_modules` is a link to the monorepo's, so that its
 * files import the packages as an installed app does.
 */
export async function makeApp(files: Record<string, string>): Promise<TestApp> {
  const path = await mkdtemp(join(tmpdir(), "channelkit-app-"));
  await symlink(join(ROOT, "node_modules"), join(path, "node_modules"), "dir");
  await writeFile(join(path, "package.json"), `${JSON.stringify({ name: "my-app", private: true, type: "module" })}\n`);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(path, name)), { recursive: true });
    await writeFile(join(path, name), text);
  }
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}
