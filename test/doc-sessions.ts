/**
 * The shell sessions of the documentation, run as a reader runs them: a page's blocks marked
 * `runnable`, in order, in one bash shell in a fresh directory, against the servers the page
 * starts (started here on a free port instead: `npm start` and `npx channelkit serve`), with
 * `npx channelkit` the repository's built command. What the page shows under a command, or
 * in an `output` block after a runnable one, is checked against what was printed, ids, keys
 * and timestamps aside. The conventions are in docs/contributing.md.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { killAll, makeApp, type ServeProcess, startServe } from "../packages/cli/src/test-process.js";
import { type DocBlock, ROOT, where } from "./docs.js";

/** The languages of a shell block. */
const SHELLS = new Set(["sh", "bash", "shell", "console"]);

/** One command of a session, with what the page shows it prints. */
export interface ShellCommand {
  /** As the page writes it, its continuation lines included. */
  text: string;
  /** The page's line of its first line. */
  line: number;
  /** The output the page shows under it (its comment, or a console block's lines), or null. */
  shown: string | null;
}

/** A runnable block of a page. */
export interface SessionStep {
  block: DocBlock;
  /** A command that runs on (a second terminal) while the session goes on. */
  background: boolean;
  commands: ShellCommand[];
  /** The `output` block after it: what its commands print, together. */
  output: DocBlock | null;
}

/** The session of one page: its runnable blocks, and the files its code blocks name. */
export interface PageSession {
  page: string;
  steps: SessionStep[];
  /** `// channelkit.config.ts` blocks: written in the session's directory before it starts. */
  files: Record<string, string>;
  /** Mistakes in the page's fences. */
  errors: string[];
}

/** True when a shell line leaves a quote open or ends with a backslash: the command goes on. */
function continues(text: string): boolean {
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (quote === "'") {
      if (char === "'") quote = null;
    } else if (quote === '"') {
      if (char === "\\") i++;
      else if (char === '"') quote = null;
    } else if (char === "\\") {
      if (i === text.length - 1) return true;
      i++;
    } else if (char === "'" || char === '"') quote = char;
    else if (char === "#" && (i === 0 || /\s/.test(text[i - 1] as string))) {
      // A comment: the rest of the line (unless inside the command's last line, checked above).
      const newline = text.indexOf("\n", i);
      if (newline < 0) return false;
      i = newline;
    }
  }
  return quote !== null;
}

/**
 * The commands of a `sh` block. A comment right under a command that begins with `{`, `[`,
 * `"`, `data:` or `HTTP/` shows its output; comment lines indented under it (`#  ...`)
 * continue it. Any other comment, and a blank line, is prose.
 */
export function shellCommands(block: DocBlock): ShellCommand[] {
  const lines = block.code.replace(/\n$/, "").split("\n");
  const commands: ShellCommand[] = [];
  let state: "prose" | "after" | "output" = "prose";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const current = commands.at(-1);
    if (line.trim() === "") {
      state = "prose";
    } else if (line.trimStart().startsWith("#")) {
      const text = line.trimStart().replace(/^#\s?/, "");
      if (current && state === "after" && /^([{["]|data: |HTTP\/)/.test(text)) {
        current.shown = text;
        state = "output";
      } else if (current && state === "output" && /^#\s{2,}\S/.test(line.trimStart())) {
        current.shown = `${current.shown}\n${text}`;
      } else {
        state = "prose";
      }
    } else {
      let text = line;
      const first = i;
      while (continues(text) && i + 1 < lines.length) text += `\n${lines[++i]}`;
      commands.push({ text, line: block.line + 1 + first, shown: null });
      state = "after";
    }
  }
  return commands;
}

/** The commands of a `console` block: `$ ` lines (and their continuations), each followed by its output. */
export function consoleCommands(block: DocBlock): ShellCommand[] {
  const lines = block.code.replace(/\n$/, "").split("\n");
  const commands: ShellCommand[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.startsWith("$ ")) {
      let text = line.slice(2);
      const first = i;
      while (continues(text) && i + 1 < lines.length) text += `\n${(lines[++i] as string).replace(/^> /, "")}`;
      commands.push({ text, line: block.line + 1 + first, shown: null });
    } else {
      const current = commands.at(-1);
      if (current) current.shown = current.shown === null ? line : `${current.shown}\n${line}`;
    }
  }
  return commands;
}

/** What a shell block's fence may say after its language, and an output block's. */
const SHELL_FLAGS = new Set(["runnable", "background"]);

/** The session of a page: null when it marks nothing runnable. */
export function pageSession(page: string, blocks: DocBlock[]): PageSession | null {
  const session: PageSession = { page, steps: [], files: {}, errors: [] };
  let last: SessionStep | null = null;
  for (const block of blocks) {
    const name = /^\/\/\s*(channelkit\.config\.[cm]?[jt]s)\b/.exec(block.code)?.[1];
    if (name) session.files[name] = block.code;
    if (block.flags.includes("output")) {
      if (block.flags.length > 1) session.errors.push(`${where(block)}: an output block takes no other fence word`);
      if (!last || last.output) session.errors.push(`${where(block)}: an output block follows no runnable block`);
      else last.output = block;
      continue;
    }
    if (!SHELLS.has(block.lang)) continue;
    const unknown = block.flags.filter((flag) => !SHELL_FLAGS.has(flag));
    if (unknown.length > 0) session.errors.push(`${where(block)}: unknown fence word ${unknown.join(", ")} (a shell block takes runnable, background)`);
    if (!block.flags.includes("runnable")) {
      if (block.flags.includes("background")) session.errors.push(`${where(block)}: background without runnable`);
      last = null;
      continue;
    }
    const commands = block.lang === "console" ? consoleCommands(block) : shellCommands(block);
    const background = block.flags.includes("background");
    if (background && (commands.length !== 1 || commands[0]?.shown))
      session.errors.push(`${where(block)}: a background block is one command, its output unshown`);
    last = { block, background, commands, output: null };
    session.steps.push(last);
  }
  return session.steps.length > 0 || session.errors.length > 0 ? session : null;
}

/** The pattern of an output as a page shows it (see {@link shownPattern}), unanchored. */
function shownSource(shown: string): string {
  const text = shown.trim();
  const token = /("…")|((?<![\w-])[0-9a-f]{4,}-?…)|(…)|(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)|(<[a-z][a-z0-9 ,_-]*>)|(\s+)|([\s\S])/gy;
  let source = "";
  for (const match of text.matchAll(token)) {
    if (match[1] !== undefined) source += '"(?:[^"\\\\]|\\\\.)*"';
    else if (match[2] !== undefined) source += "[\\w-]*";
    else if (match[3] !== undefined) source += /[\w*-]/.test(text[match.index - 1] ?? "") ? "[\\w*-]*" : "[\\s\\S]*?";
    else if (match[4] !== undefined) source += "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?Z";
    else if (match[5] !== undefined) source += "[\\s\\S]*?";
    else if (match[6] !== undefined) source += "\\s*";
    else source += (match[7] as string).replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  }
  return source;
}

/**
 * The regular expression of an output as a page shows it: `"…"` any JSON string, an id cut by
 * `…` (`93643b01-…`) any id, `svc_live_…` the rest of the token, any other `…` anything, a
 * timestamp any timestamp, `<a placeholder>` anything, whitespace optional.
 */
export function shownPattern(shown: string): RegExp {
  return new RegExp(`^\\s*${shownSource(shown)}\\s*$`);
}

/** True when `actual` is what the page shows (see {@link shownPattern}). */
export function matchesShown(shown: string, actual: string): boolean {
  return shownPattern(shown).test(actual);
}

/** True when `actual` has what the page shows somewhere in it. */
export function containsShown(shown: string, actual: string): boolean {
  return new RegExp(shownSource(shown)).test(actual);
}

/** What one command did. */
export interface CommandResult {
  command: ShellCommand;
  /** As sent to the shell: placeholders replaced, URLs the servers'. */
  sent: string;
  stdout: string;
  /** Its stderr, the command's warning lines (`channelkit: WARNING: …`) left out. */
  stderr: string;
  code: number;
}

/** What a session did. */
export interface SessionResult {
  /** Its directory (the files its commands wrote are there). */
  dir: string;
  /** Per step, what each of its commands did. */
  steps: { step: SessionStep; results: CommandResult[] }[];
  /** What each background command printed, in the order they started. */
  background: string[];
  servers: ServeProcess[];
  /** What differs from the page: each at its file and line. */
  failures: string[];
}

/** The values a placeholder of a command stands for: the latest the session printed. */
interface Seen {
  tenant?: string;
  channel?: string;
  widgetChannel?: string;
  conversation?: string;
  key?: string;
  keys: Record<string, string>;
}

/** Records the ids and keys in what a command or a server printed. */
function observe(seen: Seen, text: string): void {
  for (const match of text.matchAll(/\bsvc_(live|test|pub)_[A-Za-z0-9]{20,}/g)) {
    seen.keys[match[1] as string] = match[0];
    seen.key = match[0];
  }
  // The demo's start-up lines.
  for (const match of text.matchAll(/^\s*channel: ([0-9a-f-]{36})$/gm)) seen.channel = match[1];
  for (const match of text.matchAll(/channel update ([0-9a-f-]{36}) --allowed-origin/g)) seen.widgetChannel = match[1];
  for (const match of text.matchAll(/--tenant ([0-9a-f-]{36})/g)) seen.tenant = match[1];
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) walk(item);
      return;
    }
    if (typeof value !== "object" || value === null) return;
    const object = value as Record<string, any>;
    if (typeof object.tenant?.id === "string") seen.tenant = object.tenant.id;
    if (Array.isArray(object.tenants)) for (const tenant of object.tenants) seen.tenant = tenant.id;
    const channels = [object.channel, ...(Array.isArray(object.channels) ? object.channels : [])];
    for (const channel of channels) {
      if (typeof channel?.id !== "string" || typeof channel.mode !== "string") continue;
      if (channel.mode === "public") seen.widgetChannel = channel.id;
      else seen.channel = channel.id;
    }
    if (typeof object.conversation_id === "string") seen.conversation = object.conversation_id;
    for (const item of Object.values(object)) walk(item);
  };
  for (const line of [text, ...text.split("\n")]) {
    try {
      walk(JSON.parse(line));
    } catch {
      // Not JSON.
    }
  }
}

/** A command with its placeholders replaced by what they stand for, and the servers' URLs; or why it cannot run. */
function resolve(text: string, seen: Seen, urls: Map<string, string>): { sent: string } | { error: string } {
  const values: [RegExp, string, string | undefined][] = [
    [/<tenant id[^<>\n]*>/g, "<tenant id>", seen.tenant],
    [/<widget channel id[^<>\n]*>/g, "<widget channel id>", seen.widgetChannel],
    [/<channel id[^<>\n]*>/g, "<channel id>", seen.channel],
    [/<conversation id[^<>\n]*>/g, "<conversation id>", seen.conversation],
    [/<api key[^<>\n]*>/g, "<api key>", seen.key],
    [/\bsvc_live_…/g, "svc_live_…", seen.keys.live],
    [/\bsvc_test_…/g, "svc_test_…", seen.keys.test],
    [/\bsvc_pub_…/g, "svc_pub_…", seen.keys.pub],
    [/<the same secret>/g, "<the same secret>", '"$CHANNELKIT_ADMIN_JWT_SECRET"'],
  ];
  let sent = text;
  for (const [pattern, name, value] of values) {
    if (!pattern.test(sent)) continue;
    if (value === undefined) return { error: `nothing the session printed before stands for ${name}` };
    sent = sent.replace(pattern, () => value);
  }
  const left = /<[a-z][a-z0-9 ,_-]*>|…/.exec(sent.replace(/(^|\s)#.*$/gm, ""));
  if (left) return { error: `a placeholder this check cannot fill: ${left[0]}` };
  for (const [port, url] of urls) sent = sent.replaceAll(`http://127.0.0.1:${port}`, url).replaceAll(`http://localhost:${port}`, url);
  return { sent };
}

/** The root package's `npm start`, as arguments of `channelkit`. */
function npmStartArgs(): string[] {
  const script: string = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts.start;
  const match = /^node packages\/cli\/dist\/bin\.js (.*)$/.exec(script);
  if (!match) throw new Error(`npm start is no longer the channelkit command: ${script}`);
  return (match[1] as string).split(/\s+/);
}

/** The environment of a reader's shell: this process's, without what would redirect the command. */
function readerEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if ((name.startsWith("CHANNELKIT_") && !name.startsWith("CHANNELKIT_TEST_")) || name === "PORT" || name === "NODE_ENV") continue;
    env[name] = value;
  }
  return env;
}

/** A bash process fed one command at a time. */
class Shell {
  private readonly bash: ChildProcess;
  private stdout = "";
  private stderr = "";
  private count = 0;
  private waiter: (() => void) | null = null;

  constructor(
    readonly cwd: string,
    readonly own: string,
  ) {
    this.bash = spawn("bash", ["--noprofile", "--norc"], { cwd, env: readerEnv(), stdio: ["pipe", "pipe", "pipe"] });
    this.bash.stdout?.on("data", (chunk: Buffer) => {
      this.stdout += chunk.toString();
      this.waiter?.();
    });
    this.bash.stderr?.on("data", (chunk: Buffer) => {
      this.stderr += chunk.toString();
    });
    this.bash.once("exit", () => this.waiter?.());
    const bin = join(ROOT, "packages/cli/dist/bin.js");
    this.write(
      [
        `__CK=${JSON.stringify(own)}`,
        '__ck_serve() { printf \'%s\\0\' "$@" > "$__CK/serve.args"; env -0 > "$__CK/serve.env"; }',
        `npx() { if [ "$1" = channelkit ]; then shift; if [ "$1" = serve ]; then __ck_serve "$@"; else node ${JSON.stringify(bin)} "$@"; fi; else command npx "$@"; fi; }`,
        'npm() { if [ "$1" = start ]; then __ck_serve npm "$@"; else command npm "$@"; fi; }',
        "__ck_bg=()",
      ].join("\n"),
    );
  }

  private write(text: string): void {
    this.bash.stdin?.write(`${text}\n`);
  }

  /** Runs a command to its end: its output, and its exit code (null when it did not end within `timeoutMs`). */
  async run(text: string, timeoutMs: number): Promise<{ stdout: string; stderr: string; code: number | null }> {
    const n = ++this.count;
    const out = join(this.own, `${n}.out`);
    const err = join(this.own, `${n}.err`);
    const done = new RegExp(`__CK_DONE__ ${n} (\\d+)\\n`);
    this.write(`{ ${text}\n} </dev/null >${JSON.stringify(out)} 2>${JSON.stringify(err)}\nprintf '__CK_DONE__ ${n} %s\\n' "$?"`);
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), timeoutMs);
      const check = () => {
        const match = done.exec(this.stdout);
        if (match || this.bash.exitCode !== null) {
          clearTimeout(timer);
          this.waiter = null;
          resolve(match ? Number(match[1]) : null);
        }
      };
      this.waiter = check;
      check();
    });
    const read = (path: string) => {
      try {
        return readFileSync(path, "utf8");
      } catch {
        return "";
      }
    };
    return { stdout: read(out), stderr: `${read(err)}${this.takeStderr()}`, code };
  }

  /** Starts a command in the background; resolves once it printed something (or after `timeoutMs`), with a reader of its output. */
  async background(text: string, timeoutMs: number): Promise<() => string> {
    const n = ++this.count;
    const out = join(this.own, `${n}.out`);
    this.write(`{ ${text}\n} </dev/null >${JSON.stringify(out)} 2>/dev/null &\n__ck_bg+=($!)`);
    const read = () => {
      try {
        return readFileSync(out, "utf8");
      } catch {
        return "";
      }
    };
    const until = Date.now() + timeoutMs;
    while (read() === "" && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    return read;
  }

  private takeStderr(): string {
    const text = this.stderr;
    this.stderr = "";
    return text;
  }

  /** Stops the background commands, then the shell. */
  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) => {
      if (this.bash.exitCode !== null) resolve();
      else this.bash.once("exit", () => resolve());
    });
    this.write(`for __p in "\${__ck_bg[@]}"; do kill "$__p" 2>/dev/null; done; wait; exit 0`);
    this.bash.stdin?.end();
    const timer = setTimeout(() => this.bash.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

/** The server a command asked for (`npm start`, `npx channelkit serve ...`), started here on a free port: its page port and process. */
async function startServer(own: string, cwd: string): Promise<{ port: string; server: ServeProcess }> {
  const recorded = readFileSync(join(own, "serve.args"), "utf8").split("\0").slice(0, -1);
  const env: Record<string, string> = {};
  for (const entry of readFileSync(join(own, "serve.env"), "utf8").split("\0")) {
    const eq = entry.indexOf("=");
    const name = entry.slice(0, eq);
    if (name.startsWith("CHANNELKIT_") || name === "NODE_ENV" || name === "PORT" || name === "DATABASE_URL") env[name] = entry.slice(eq + 1);
  }
  rmSync(join(own, "serve.args"));
  let args: string[];
  if (recorded[0] === "npm") {
    if (recorded.length !== 2) throw new Error(`npm ${recorded.slice(1).join(" ")}: only the root's npm start is started by this check`);
    args = npmStartArgs().slice(1);
  } else {
    args = recorded.slice(1);
  }
  // Its port on the page; a free one here.
  let port = env.PORT ?? "3000";
  const at = args.indexOf("--port");
  if (at >= 0) {
    port = args[at + 1] as string;
    args.splice(at, 2);
  }
  delete env.PORT;
  const server = await startServe([...args, "--port", "0"], env, 20_000, { cwd });
  return { port, server };
}

/** How long a command may take. */
const COMMAND_TIMEOUT_MS = 60_000;

/** The text a command printed, as a reader's terminal shows it (its warnings aside). */
function printed(result: Pick<CommandResult, "stdout" | "stderr">): string {
  return `${result.stdout}${result.stderr}`;
}

/** True when a session starts a server of its own, or has a config (then no demo): else it runs against `npm start`'s, started first. */
function startsServer(session: PageSession): boolean {
  return (
    Object.keys(session.files).length > 0 ||
    session.steps.some((step) => step.commands.some((command) => /(^|[\s;&|(])(npm start|npx channelkit serve)\b/m.test(command.text)))
  );
}

/**
 * Runs a page's session: its files written in a new directory, its runnable blocks in order
 * in one shell there, the servers it starts started here, then everything it started
 * stopped. The result lists what differs from the page; an extra check may read the rest.
 * The caller removes `result.dir`.
 */
export async function runSession(session: PageSession): Promise<SessionResult> {
  const app = await makeApp(session.files);
  const own = mkdtempSync(join(tmpdir(), "channelkit-docs-session-"));
  const shell = new Shell(app.path, own);
  const result: SessionResult = { dir: app.path, steps: [], background: [], servers: [], failures: [...session.errors] };
  const seen: Seen = { keys: {} };
  const urls = new Map<string, string>();
  const readers: (() => string)[] = [];

  /** Runs one command; false when the session cannot go on. */
  const run = async (command: ShellCommand, step: SessionStep | null, results: CommandResult[]): Promise<boolean> => {
    const at = `${session.page}:${command.line}`;
    const resolved = resolve(command.text, seen, urls);
    if ("error" in resolved) {
      result.failures.push(`${at}: ${resolved.error}`);
      return false;
    }
    if (step?.background) {
      readers.push(await shell.background(`exec ${resolved.sent}`, 5_000));
      return true;
    }
    const ran = await shell.run(resolved.sent, COMMAND_TIMEOUT_MS);
    const stderr = ran.stderr
      .split("\n")
      .filter((line) => !/^channelkit: WARNING: /.test(line))
      .join("\n");
    const done: CommandResult = { command, sent: resolved.sent, stdout: ran.stdout, stderr, code: ran.code ?? -1 };
    results.push(done);
    if (ran.code === null) {
      result.failures.push(`${at}: did not end within ${COMMAND_TIMEOUT_MS / 1000} s: ${command.text}`);
      return false;
    }
    observe(seen, done.stdout);
    // The server the command asked for, started here.
    let startup = "";
    if (existsSync(join(own, "serve.args"))) {
      try {
        const { port, server } = await startServer(own, app.path);
        result.servers.push(server);
        urls.set(port, server.url);
        startup = server.lines.join("\n");
        observe(seen, startup);
      } catch (error) {
        result.failures.push(`${at}: the server did not start: ${(error as Error).message}`);
        return false;
      }
    }
    const shownError = `${command.shown ?? ""}${step?.output?.code ?? ""}`.includes('"error"');
    if (done.code !== 0 && !shownError) {
      result.failures.push(`${at}: exited with ${done.code}: ${command.text}\n${printed(done)}`.trimEnd());
    } else if (!shownError && /^\{"error":\{"code":"/m.test(printed(done))) {
      result.failures.push(`${at}: answered an error the page does not show: ${printed(done).trim()}`);
    }
    if (command.shown !== null && !matchesShown(command.shown, printed(done) || startup)) {
      result.failures.push(`${at}: printed\n${(printed(done) || startup).trim()}\nwhere the page shows\n${command.shown}`);
    }
    return true;
  };

  try {
    if (!startsServer(session)) await run({ text: "npm start", line: 0, shown: null }, null, []);
    for (const step of session.steps) {
      const results: CommandResult[] = [];
      result.steps.push({ step, results });
      for (const command of step.commands) if (!(await run(command, step, results))) return result;
      const together = results.map(printed).join("");
      if (step.output && !matchesShown(step.output.code, together)) {
        result.failures.push(`${where(step.output)}: the block above printed\n${together.trim()}\nwhere the page shows\n${step.output.code.trim()}`);
      }
    }
    // What the background commands print last arrives a moment after.
    if (readers.length > 0) await new Promise((resolve) => setTimeout(resolve, 500));
    return result;
  } finally {
    result.background = readers.map((read) => read());
    await shell.close();
    await killAll();
    rmSync(own, { recursive: true, force: true });
  }
}
