import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { externalConversationId } from "@channelkit/core";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SlackStandIn, STANDIN_BOT } from "../packages/chat/src/slack-standin.js";
import { TelegramStandIn } from "../packages/chat/src/telegram-standin.js";
import { ensureBuilt } from "../packages/cli/src/test-process.js";
import { type Binary, describeWithRuntime, runtimeBinary } from "../test/runtimes/binaries.js";

/*
 * Each example as a user runs it: the database provisioned with the built `channelkit`
 * command, the example started with its own `start` script on a free port, then the curl
 * request of its README sent with fetch. Runs on the built packages (`npm run build`).
 */

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "packages/cli/dist/bin.js");
const SECRET_KEY = "4f".repeat(32);
const run = promisify(execFile);

/** Runs the built `channelkit` command on `db` and parses its JSON output. */
async function channelkit(db: string, ...args: string[]): Promise<Record<string, any>> {
  const { stdout } = await run(process.execPath, [CLI, ...args, "--db", db], { env: { ...process.env, CHANNELKIT_SECRET_KEY: SECRET_KEY } });
  return JSON.parse(stdout) as Record<string, any>;
}

/** A tenant and an `echo` channel, as the examples' READMEs provision them; returns the key. */
async function provision(db: string): Promise<string> {
  const { tenant } = await channelkit(db, "tenant", "create", "--name", "Demo");
  const created = await channelkit(db, "channel", "create", "--tenant", tenant.id, "--flow", "echo");
  return created.api_key as string;
}

/** The curl request of an example's README: its path on the server and its body. */
async function readmeRequest(example: string): Promise<{ path: string; body: string }> {
  const readme = await readFile(join(ROOT, "examples", example, "README.md"), "utf8");
  const line = readme.split("\n").find((candidate) => candidate.startsWith("curl -s http://127.0.0.1:3000/") && candidate.includes("/execute"));
  const path = line?.match(/^curl -s http:\/\/127\.0\.0\.1:3000(\S+)/)?.[1];
  const body = line?.match(/ -d '([^']*)'/)?.[1];
  if (!path || !body) throw new Error(`examples/${example}/README.md has no execute curl line`);
  return { path, body };
}

interface Started {
  url: string;
  /** What it printed so far, stdout and stderr. */
  output(): string;
  stop(): Promise<void>;
}

/** Starts an example with its package's `start` script and resolves once it prints where it listens. */
async function start(example: string, db: string, extraEnv: Record<string, string | undefined> = {}): Promise<Started> {
  const cwd = join(ROOT, "examples", example);
  const script = (JSON.parse(await readFile(join(cwd, "package.json"), "utf8")) as { scripts: { start: string } }).scripts.start;
  const [command, ...args] = script.split(" ");
  // `npm start` would put npm between the test and the server, and npm does not pass SIGTERM on.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: "0",
    HOST: "127.0.0.1",
    CHANNELKIT_DB: db,
    CHANNELKIT_SECRET_KEY: SECRET_KEY,
    NODE_ENV: "development",
  };
  for (const [name, value] of Object.entries(extraEnv)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return spawnServer(`examples/${example}`, command === "node" ? process.execPath : (command as string), args, cwd, env);
}

/** Spawns a server and resolves once it prints `listening on <url>`. */
async function spawnServer(label: string, command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, waitMs = 15_000): Promise<Started> {
  const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${label} did not print "listening on" in time:\n${output}`));
    }, waitMs);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const found = output.match(/listening on (http:\/\/\S+)/);
      if (found) {
        clearTimeout(timer);
        resolve(found[1] as string);
      }
    };
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${label} exited with ${code}:\n${output}`));
    });
  });
  return { url, output: () => output, stop: () => stop(child) };
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** Provisions `db`, starts the example on it and checks the README's request answers `Echo: ...`. */
async function checkExample(example: string, db: string): Promise<void> {
  const key = await provision(db);
  const { path, body } = await readmeRequest(example);
  const server = await start(example, db);
  try {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await fetch(server.url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body,
    });
    const run = (await response.json()) as { status: string; output: { messages: { content: string }[] } };
    expect(response.status, JSON.stringify(run)).toBe(200);
    expect(run.status).toBe("success");
    expect(run.output.messages[0]?.content).toBe(`Echo: ${(JSON.parse(body) as { payload: string }).payload}`);
  } finally {
    await server.stop();
  }
}

describe("examples", () => {
  let dir = "";
  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error("the examples run on the built packages: npm run build first");
    dir = await mkdtemp(join(tmpdir(), "channelkit-examples-"));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it.each(["node-http", "fastify", "hono"])("examples/%s on SQLite answers its README's request", async (example) => {
    await checkExample(example, join(dir, `${example}.db`));
  });

  it("examples/livechat-console is served by its start script: the page, its script (which parses as a module) and styles, nothing else", async () => {
    const server = await start("livechat-console", join(dir, "console.db"));
    try {
      const page = await fetch(`${server.url}/`);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
      const html = await page.text();
      // What the page loads, as it names it.
      const assets = [...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((match) => match[1] as string);
      expect(assets.sort()).toEqual(["/console.css", "/console.js"]);
      const script = await fetch(`${server.url}/console.js`);
      expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
      const file = join(dir, "console.mjs");
      await writeFile(file, await script.text());
      await run(process.execPath, ["--check", file]);
      const styles = await fetch(`${server.url}/console.css`);
      expect([styles.status, styles.headers.get("content-type")]).toEqual([200, "text/css; charset=utf-8"]);
      expect((await fetch(`${server.url}/serve.mjs`)).status).toBe(404);
    } finally {
      await server.stop();
    }
  });

  describeWithPostgres("on Postgres", (serverUrl) => {
    it("examples/express-postgres answers its README's request", async () => {
      const database = await createTestDatabase(serverUrl);
      try {
        await checkExample("express-postgres", database.url);
      } finally {
        await database.drop();
      }
    });
  });
});

describe("npx channelkit, as the examples' READMEs write it", () => {
  it("is linked by npm install in the repository, from every workspace, and runs", async () => {
    // npm links bins when it installs, before `prepare` builds dist/: the link must not need dist/ to exist.
    for (const where of [ROOT, join(ROOT, "examples", "node-http")]) {
      const { stdout } = await run(process.execPath, [join(ROOT, "node_modules", ".bin", "channelkit"), "--help"], { cwd: where });
      expect(stdout).toContain("Usage: channelkit <command>");
    }
    const { stdout } = await run("npx", ["--no-install", "channelkit", "--help"], { cwd: join(ROOT, "examples", "node-http") });
    expect(stdout).toContain("Usage: channelkit <command>");
  });
});

describe("examples/ai-agent", () => {
  let dir = "";
  let server: Started | undefined;
  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error("the examples run on the built packages: npm run build first");
    dir = await mkdtemp(join(tmpdir(), "channelkit-ai-agent-"));
  });
  afterAll(async () => {
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The bodies of the README's execute curl lines, in order. */
  async function readmeBodies(): Promise<{ payload: string }[]> {
    const readme = await readFile(join(ROOT, "examples", "ai-agent", "README.md"), "utf8");
    return readme
      .split("\n")
      .filter((line) => line.startsWith("curl -s http://127.0.0.1:3000/public/v1/api/execute"))
      .map((line) => JSON.parse(line.match(/ -d '([^']*)'/)?.[1] ?? "null") as { payload: string });
  }

  it("on the mock model, answers the README's order question through lookupOrder (call and result in history) and hands over to the inbox", async () => {
    // On an empty database it provisions its own channel (the CLI knows only the demo flows) and prints the key.
    const agent = await start("ai-agent", join(dir, "agent.db"), { OPENAI_API_KEY: undefined });
    server = agent;
    const output = agent.output();
    expect(output).toContain("model: mock");
    const key = output.match(/API key \(shown once, keep it\): (svc_live_\w+)/)?.[1] as string;
    expect(key, output).toBeDefined();
    const { path, body } = await readmeRequest("ai-agent");
    expect(JSON.parse(body)).toEqual({ payload: "Where is order 1042?" });
    const execute = async (payload: string) => {
      const response = await fetch(agent.url + path, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: payload,
      });
      expect(response.status).toBe(200);
      return (await response.json()) as Record<string, any>;
    };

    const asked = await execute(body);
    expect(asked.status, JSON.stringify(asked)).toBe("success");
    expect(asked.output.metadata.execution_order).toEqual(["llm", "lookupOrder", "llm"]);
    const history = await fetch(`${agent.url}/public/v1/api/conversations/${asked.conversation_id}/messages`, { headers: { authorization: `Bearer ${key}` } });
    expect(history.status).toBe(200);
    const { messages } = (await history.json()) as { messages: Record<string, any>[] };
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    const [, call, result, answer] = messages as [unknown, Record<string, any>, Record<string, any>, Record<string, any>];
    expect(call.tool_calls).toHaveLength(1);
    expect(call.tool_calls[0]).toMatchObject({ name: "lookupOrder", arguments: { orderId: "1042" } });
    expect(result).toMatchObject({ role: "tool", node_type: "tool", tool_call_id: call.tool_calls[0].id });
    expect(JSON.parse(result.content)).toMatchObject({ found: true, orderId: "1042", status: "shipped", carrier: "DHL" });
    expect(answer.content).toContain("Order 1042 has shipped");
    expect(answer.tool_calls).toBeNull();

    // The README's handover request.
    const handover = (await readmeBodies()).find((candidate) => /person/.test(candidate.payload));
    expect(handover).toBeDefined();
    const handedOver = await execute(JSON.stringify(handover));
    expect(handedOver.status, JSON.stringify(handedOver)).toBe("pending");
    expect(handedOver.output.metadata).toMatchObject({ execution_order: ["llm", "handover", "livechat"], livechat_mode: "livechat_waiting" });
    expect(handedOver.output.messages.at(-1).content).toBe("A person from our support team will take it from here.");
  });
});

/** A private-chat text message from Telegram user `chatId`, as Telegram delivers it. */
function telegramUpdate(updateId: number, chatId: number, text: string) {
  return {
    update_id: updateId,
    message: {
      message_id: updateId,
      from: { id: chatId, is_bot: false, first_name: "Ada", username: `ada${chatId}` },
      chat: { id: chatId, type: "private", first_name: "Ada" },
      date: Math.floor(Date.now() / 1000),
      text,
    },
  };
}

/** A direct message to the bot from Slack user `user` in `channel`, as the Events API delivers it (message.im). */
function slackDirectMessage(eventId: string, channel: string, user: string, text: string) {
  const ts = `${Math.floor(Date.now() / 1000)}.${eventId.slice(-6)}`;
  return {
    token: "unused-verification-token",
    team_id: STANDIN_BOT.teamId,
    api_app_id: "A0000001",
    event: { type: "message", channel, channel_type: "im", user, text, ts, event_ts: ts, team: STANDIN_BOT.teamId },
    type: "event_callback",
    event_id: eventId,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ enterprise_id: null, team_id: STANDIN_BOT.teamId, user_id: STANDIN_BOT.userId, is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
  };
}

/** A request to `url` as Slack sends it: the body signed with the app's signing secret (v0, `X-Slack-Signature`). */
function toSlack(url: string, body: unknown, secret: string): Promise<Response> {
  const raw = JSON.stringify(body);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${raw}`).digest("hex")}`;
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", "x-slack-request-timestamp": timestamp, "x-slack-signature": signature },
    body: raw,
  });
}

/*
 * examples/chat-bots as its README runs it, on stand-ins of Telegram's Bot API and Slack's Web
 * API (the variables TELEGRAM_API_URL and SLACK_API_URL): deliveries signed as the platforms
 * sign them, to the webhook URLs the example prints.
 */
describe("examples/chat-bots", () => {
  const TELEGRAM = { TELEGRAM_BOT_TOKEN: "123456:example-bot", TELEGRAM_SECRET_TOKEN: "example-secret_0123" };
  const SLACK = { SLACK_BOT_TOKEN: "xoxb-1111-2222-example", SLACK_SIGNING_SECRET: "c4ca4238a0b923820dcc509a6f75849b" };
  const telegram = new TelegramStandIn();
  const slack = new SlackStandIn();
  let dir = "";
  let server: Started | undefined;
  beforeAll(async () => {
    // The example imports the packages' dist: built here when a source is newer.
    await ensureBuilt();
    dir = await mkdtemp(join(tmpdir(), "channelkit-chat-bots-"));
    await Promise.all([telegram.start(), slack.start()]);
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    await Promise.all([telegram.close(), slack.close()]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Starts the example on `db` with the platforms' variables, their APIs at the stand-ins; returns the webhook URLs it printed. */
  async function startBots(db: string) {
    await server?.stop();
    server = await start("chat-bots", db, { ...TELEGRAM, ...SLACK, TELEGRAM_API_URL: telegram.url, SLACK_API_URL: slack.apiUrl, PUBLIC_URL: undefined });
    const output = server.output();
    const webhook = (name: string) => output.match(new RegExp(`^${name} \\(channel [\\w-]+\\): \\w+ webhook (\\S+)$`, "m"))?.[1];
    return { url: server.url, output, telegram: webhook("Telegram bot"), slack: webhook("Slack bot") };
  }

  it("answers Telegram and Slack at the webhook URLs it prints, each chat counted as its own conversation from its history; started again, keeps its channels", async () => {
    const db = join(dir, "bots.db");
    const bots = await startBots(db);
    for (const url of [bots.telegram, bots.slack]) expect(url, bots.output).toMatch(new RegExp(`^${bots.url}/channels/chat/[\\w-]+$`));
    expect(bots.telegram).not.toBe(bots.slack);
    // What to do with them: Telegram's setWebhook with the secret token, Slack's Request URL.
    expect(bots.output).toContain(
      `curl -s "${telegram.url}/bot$TELEGRAM_BOT_TOKEN/setWebhook" -d "url=${bots.telegram}" -d "secret_token=$TELEGRAM_SECRET_TOKEN"`,
    );
    expect(bots.output).toContain(`give it as the Request URL:\n  ${bots.slack}\n`);

    const toTelegram = (url: string, body: unknown, secret = TELEGRAM.TELEGRAM_SECRET_TOKEN) =>
      fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secret },
        body: JSON.stringify(body),
      }).then((response) => response.status);
    // What the user reads once the reply is written (it is posted, then edited as the flow writes).
    const reads = (chatId: number, expected: string[]) =>
      telegram.waitFor(() => JSON.stringify(telegram.textOf(chatId)) === JSON.stringify(expected), `chat ${chatId} to read ${JSON.stringify(expected)}`);
    const slackReads = (channel: string, expected: string[]) =>
      slack.waitFor(() => JSON.stringify(slack.textOf(channel)) === JSON.stringify(expected), `${channel} to read ${JSON.stringify(expected)}`);

    const telegramUrl = bots.telegram as string;
    expect(await toTelegram(telegramUrl, telegramUpdate(1, 601, "hello"))).toBe(200);
    await reads(601, ["olleh\nMessage 1 on telegram."]);
    expect(await toTelegram(telegramUrl, telegramUpdate(2, 601, "again"))).toBe(200);
    await reads(601, ["olleh\nMessage 1 on telegram.", "niaga\nMessage 2 on telegram. Before it you said: hello"]);
    expect(await toTelegram(telegramUrl, telegramUpdate(3, 602, "stressed"))).toBe(200);
    await reads(602, ["desserts\nMessage 1 on telegram."]);
    expect(telegram.calls.every((call) => call.token === TELEGRAM.TELEGRAM_BOT_TOKEN)).toBe(true);
    // An update without the secret token runs nothing.
    expect(await toTelegram(telegramUrl, telegramUpdate(4, 603, "forged"), "another")).toBe(401);

    // Slack checks the Request URL first, then delivers events, each signed with the signing secret.
    const slackUrl = bots.slack as string;
    const challenge = await toSlack(
      slackUrl,
      { token: "unused-verification-token", challenge: "3eZbrw1aBm2rZgRN", type: "url_verification" },
      SLACK.SLACK_SIGNING_SECRET,
    );
    expect(challenge.status).toBe(200);
    expect(await challenge.json()).toEqual({ challenge: "3eZbrw1aBm2rZgRN" });
    expect((await toSlack(slackUrl, slackDirectMessage("Ev00000001", "D0000701", "U0000701", "hello"), SLACK.SLACK_SIGNING_SECRET)).status).toBe(200);
    await slackReads("D0000701", ["olleh\nMessage 1 on slack."]);
    expect((await toSlack(slackUrl, slackDirectMessage("Ev00000002", "D0000701", "U0000701", "drawer"), SLACK.SLACK_SIGNING_SECRET)).status).toBe(200);
    await slackReads("D0000701", ["olleh\nMessage 1 on slack.", "reward\nMessage 2 on slack. Before it you said: hello"]);
    expect(slack.calls.every((call) => call.token === SLACK.SLACK_BOT_TOKEN)).toBe(true);
    // A delivery signed with another secret runs nothing.
    expect((await toSlack(slackUrl, slackDirectMessage("Ev00000003", "D0000702", "U0000702", "forged"), "another-secret")).status).toBe(401);

    // Started again on its database, it keeps its channels: the same webhook URLs, the same conversations.
    const again = await startBots(db);
    expect([again.telegram, again.slack]).toEqual([bots.telegram, bots.slack].map((url) => url?.replace(bots.url, again.url)));
    expect(await toTelegram(again.telegram as string, telegramUpdate(5, 602, "live"))).toBe(200);
    await reads(602, ["desserts\nMessage 1 on telegram.", "evil\nMessage 2 on telegram. Before it you said: stressed"]);
    expect((await toSlack(again.slack as string, slackDirectMessage("Ev00000004", "D0000701", "U0000701", "stop"), SLACK.SLACK_SIGNING_SECRET)).status).toBe(
      200,
    );
    await slackReads("D0000701", [
      "olleh\nMessage 1 on slack.",
      "reward\nMessage 2 on slack. Before it you said: hello",
      "pots\nMessage 3 on slack. Before it you said: drawer",
    ]);
    expect([telegram.textOf(603), slack.textOf("D0000702")]).toEqual([[], []]);
  });

  it("lets you chat with its Telegram bot from a terminal (npm run try): each line typed is delivered, the bot's replies printed", async () => {
    const script = (JSON.parse(await readFile(join(ROOT, "examples/chat-bots/package.json"), "utf8")) as { scripts: { try: string } }).scripts.try;
    const [, file] = script.split(" ");
    const child = spawn(process.execPath, [file as string], { cwd: join(ROOT, "examples/chat-bots"), stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    const printed = (text: string) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`npm run try did not print ${JSON.stringify(text)}:\n${output}`)), 30_000);
        const check = () => {
          if (!output.includes(text)) return;
          clearTimeout(timer);
          child.stdout.off("data", check);
          resolve();
        };
        child.stdout.on("data", check);
        check();
      });
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    try {
      await printed("Type a message");
      child.stdin.write("hello\n");
      await printed("bot: olleh\n     Message 1 on telegram.");
      child.stdin.write("again\n");
      await printed("bot: niaga\n     Message 2 on telegram. Before it you said: hello");
      child.stdin.end();
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code, output).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  }, 60_000);
});

/** The command line of a runtime example's README (`PORT=3000 <command> ...`), split; and the binary it runs. */
async function readmeServerCommand(example: string): Promise<{ env: Record<string, string>; command: string; args: string[] }> {
  const readme = await readFile(join(ROOT, "examples", example, "README.md"), "utf8");
  const line = readme.split("\n").find((candidate) => /^PORT=3000 \S/.test(candidate));
  if (!line) throw new Error(`examples/${example}/README.md has no PORT=3000 command line`);
  const words = (line.split(/\s+#/)[0] as string).trim().split(/\s+/);
  const env: Record<string, string> = {};
  while (/^[A-Z_]+=/.test(words[0] ?? "")) {
    const [name, value] = (words.shift() as string).split("=") as [string, string];
    env[name] = value;
  }
  const [command, ...args] = words as [string, ...string[]];
  return { env, command, args };
}

/**
 * Starts a runtime example with its README's command line, from the repository root as the
 * README says: the binary from node_modules/.bin (or this Node for `node`), PORT=0 instead of 3000.
 */
async function startFromReadme(example: string, extraEnv: Record<string, string>): Promise<Started> {
  const { env: readmeEnv, command, args } = await readmeServerCommand(example);
  expect(readmeEnv).toEqual({ PORT: "3000" });
  const binary = command === "node" ? process.execPath : join(ROOT, command);
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: "0", HOST: "127.0.0.1", CHANNELKIT_SECRET_KEY: SECRET_KEY, ...extraEnv };
  // A first start compiles the server (Deno type-strips it, workerd loads its bundle): more time than a Node server.
  return spawnServer(`examples/${example}`, binary, args, ROOT, env, 25_000);
}

/** Sends the README's execute request with `key` and checks the echo flow's reply, as the README shows it. */
async function checkReadmeExecute(example: string, server: Started, key: string): Promise<void> {
  expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  const { path, body } = await readmeRequest(example);
  const response = await fetch(server.url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  });
  const run = (await response.json()) as { status: string; output: { result: { echo: string; turn: number } } };
  expect(response.status, JSON.stringify(run)).toBe(200);
  expect(run.status, JSON.stringify(run)).toBe("success");
  expect(run.output.result).toEqual({ echo: (JSON.parse(body) as { payload: string }).payload, turn: 1 });
}

/** workerd as miniflare's dependency installs it, if it runs. */
function workerdBinary(): Binary {
  const path = join(ROOT, "node_modules", ".bin", "workerd");
  if (!existsSync(path)) return { missing: `${path} does not exist (npm install, the miniflare devDependency)` };
  try {
    return { path, version: `workerd ${execFileSync(path, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim()}` };
  } catch (error) {
    return { missing: `${path} --version failed (was its postinstall script run?): ${(error as Error).message}` };
  }
}

/*
 * The runtime examples (Bun, Deno, a Worker in workerd) as their READMEs run them: the server
 * started with the README's command line, then its execute request. Skipped with the reason
 * printed when the runtime's binary is missing; under CI=true that fails instead.
 */
describe("runtime examples, as their READMEs run them", () => {
  let dir = "";
  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error("the examples run on the built packages: npm run build first");
    dir = await mkdtemp(join(tmpdir(), "channelkit-runtime-examples-"));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  for (const [example, name] of [
    ["bun", "bun"],
    ["deno", "deno"],
  ] as const) {
    describeWithRuntime(`examples/${example}`, runtimeBinary(name), () => {
      it("serves the README's request on a SQLite file provisioned by the Node CLI", { timeout: 30_000 }, async () => {
        const db = join(dir, `${example}.db`);
        const key = await provision(db);
        const server = await startFromReadme(example, { CHANNELKIT_DB: db });
        try {
          await checkReadmeExecute(example, server, key);
          // Deno 2 warns on the first request unless the README's command opts out of its legacy abort.
          expect(server.output()).not.toContain("legacy behavior");
        } finally {
          await server.stop();
        }
      });
    });
  }

  describeWithRuntime("examples/workers", workerdBinary(), () => {
    it("run.mjs serves the README's request in workerd, with the demo key it prints", { timeout: 30_000 }, async () => {
      const server = await startFromReadme("workers", { CHANNELKIT_D1_DIR: join(dir, "d1") });
      try {
        const key = server.output().match(/its key, shown once: (svc_live_\w+)/)?.[1];
        expect(key, server.output()).toBeDefined();
        await checkReadmeExecute("workers", server, key as string);
      } finally {
        await server.stop();
      }
    });
  });
});

/*
 * examples/agent-protocols as its README runs it: the server started twice at once on one
 * database (two instances behind a load balancer), then each protocol's client script, its
 * first message to one instance and the next, in the same conversation, to the other.
 */
describe("examples/agent-protocols", () => {
  const EXAMPLE = join(ROOT, "examples", "agent-protocols");
  const PROTOCOLS = [
    { script: "mcp", label: "MCP", type: "mcp" },
    { script: "a2a", label: "A2A", type: "a2a" },
    { script: "agui", label: "AG-UI", type: "agui" },
  ] as const;
  let dir = "";
  let servers: Started[] = [];
  beforeAll(async () => {
    // The example imports the packages' dist: built here when a source is newer.
    await ensureBuilt();
    dir = await mkdtemp(join(tmpdir(), "channelkit-agent-protocols-"));
  }, 180_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The channels a start printed, by type: `MCP (channel <id>): <endpoint> key <key>`. */
  function printedChannels(server: Started): Record<string, { id: string; endpoint: string; key: string }> {
    const channels: Record<string, { id: string; endpoint: string; key: string }> = {};
    for (const { label, type } of PROTOCOLS) {
      const found = server.output().match(new RegExp(`^${label} \\(channel ([\\w-]+)\\): (\\S+) key (svc_\\w+)$`, "m"));
      expect(found, server.output()).not.toBeNull();
      const [, id, endpoint, key] = found as unknown as [string, string, string, string];
      channels[type] = { id, endpoint, key };
    }
    return channels;
  }

  /** Runs a client script of the package (`npm run <name>`'s command) with these messages and environment; answers its stdout. */
  async function client(name: string, messages: string[], env: Record<string, string>): Promise<string> {
    const scripts = (JSON.parse(await readFile(join(EXAMPLE, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    const [command, file] = (scripts[name] as string).split(" ");
    expect(command).toBe("node");
    const { stdout } = await run(process.execPath, [file as string, ...messages], { cwd: EXAMPLE, env: { ...process.env, ...env }, timeout: 30_000 });
    return stdout;
  }

  /** What a conversation's history holds, read with the channel's key on the API channel's route. */
  async function history(url: string, conversationId: string, key: string): Promise<string[]> {
    const response = await fetch(`${url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { authorization: `Bearer ${key}` } });
    expect(response.status).toBe(200);
    const { messages } = (await response.json()) as { messages: { role: string; content: string }[] };
    return messages.map((message) => `${message.role}: ${message.content}`);
  }

  async function checkTwoInstances(db: string, config: string): Promise<void> {
    servers = await Promise.all([
      start("agent-protocols", db, { CHANNELKIT_EXAMPLE_CONFIG: config }),
      start("agent-protocols", db, { CHANNELKIT_EXAMPLE_CONFIG: config }),
    ]);
    const [one, two] = servers as [Started, Started];
    try {
      // One of them created the tenant and the channels, the other found them and their keys.
      const tenants = servers.map((server) =>
        server
          .output()
          .match(/^Tenant "Agent protocols" \(([\w-]+)\): (\d) channels created, (\d) found/m)
          ?.slice(1),
      );
      expect(tenants[0]?.[0], one.output()).toBe(tenants[1]?.[0]);
      expect(tenants.map((tenant) => tenant?.slice(1).join(",")).sort()).toEqual(["0,3", "3,0"]);
      const channels = printedChannels(one);
      const again = printedChannels(two);
      for (const { type } of PROTOCOLS) {
        const { id, key } = channels[type] as { id: string; key: string };
        expect(again[type]).toEqual({ id, key, endpoint: `${two.url}/channels/${type}/${id}` });
        expect(channels[type]?.endpoint).toBe(`${one.url}/channels/${type}/${id}`);
      }
      const written = JSON.parse(await readFile(config, "utf8")) as { url: string; channels: Record<string, { id: string; key: string }> };
      expect([one.url, two.url]).toContain(written.url);
      for (const { type } of PROTOCOLS) expect(written.channels[type]).toMatchObject({ id: channels[type]?.id, key: channels[type]?.key });

      // The A2A card, without a key, with the settings the example gave the channel.
      const a2a = channels.a2a as { id: string; key: string };
      const card = await fetch(`${two.url}/channels/a2a/${a2a.id}/.well-known/agent-card.json`);
      expect(card.status).toBe(200);
      expect(await card.json()).toMatchObject({ name: "Notes agent", skills: [expect.objectContaining({ id: "notes", name: "Notes" })] });

      // Each client script: its first message to one instance, the second to the other, in one conversation.
      const env = { CHANNELKIT_EXAMPLE_CONFIG: config, CHANNELKIT_URL: one.url, CHANNELKIT_URL_2: two.url };
      for (const { script, type } of PROTOCOLS) {
        const { id, key } = channels[type] as { id: string; key: string };
        const stdout = await client(script, [`first over ${type}`, `second over ${type}`], env);
        const lines = stdout.trimEnd().split("\n");
        expect([lines[0], lines[1], lines[3], lines[4]], stdout).toEqual([
          `you: first over ${type}`,
          `notes: Noted "first over ${type}": note 1 of this conversation.`,
          `you: second over ${type}`,
          `notes: Noted "second over ${type}": note 2 of this conversation. Before it: first over ${type}.`,
        ]);
        let conversationId: string;
        if (type === "mcp") {
          conversationId = lines[2]?.match(/^\(conversation ([\w-]+), continued with its conversation_id\)$/)?.[1] as string;
        } else if (type === "a2a") {
          const [, contextId, conversation] = lines[2]?.match(/^\(context ([\w-]+), conversation ([\w-]+), continued with its contextId\)$/) ?? [];
          conversationId = conversation as string;
          expect(conversationId).toBe(await externalConversationId({ id }, contextId as string));
        } else {
          const threadId = lines[2]?.match(/^\(thread ([\w-]+), continued with its threadId\)$/)?.[1];
          conversationId = await externalConversationId({ id }, threadId as string);
        }
        expect(conversationId, stdout).toBeDefined();
        // The history holds both turns, in order, on either instance.
        expect(await history(one.url, conversationId, key)).toEqual([
          `user: first over ${type}`,
          `assistant: Noted "first over ${type}": note 1 of this conversation.`,
          `user: second over ${type}`,
          `assistant: Noted "second over ${type}": note 2 of this conversation. Before it: first over ${type}.`,
        ]);
      }

      // With the default messages and the config's URL (the instance that wrote it last): hello, then again.
      const defaults = await client("mcp", [], { CHANNELKIT_EXAMPLE_CONFIG: config });
      expect(defaults).toContain('notes: Noted "again": note 2 of this conversation. Before it: hello.\n');
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
      servers = [];
    }
    // No server: each script fails, saying why.
    for (const { script } of PROTOCOLS) {
      const failed = await client(script, [], { CHANNELKIT_EXAMPLE_CONFIG: config }).then(
        () => undefined,
        (error: { code?: number; stderr?: string }) => error,
      );
      expect(failed?.code).toBe(1);
      expect(failed?.stderr).toMatch(new RegExp(`^${script}-client: .*\\(ECONNREFUSED\\)\\nIs the server running\\?`, "m"));
    }
  }

  it(
    "started twice at once on one SQLite file, provisions one set of channels; each client script talks to one instance and continues its conversation on the other, both turns in history",
    { timeout: 90_000 },
    async () => {
      await checkTwoInstances(join(dir, "agents.db"), join(dir, "agents.json"));
    },
  );

  describeWithPostgres("on Postgres", (serverUrl) => {
    it("started twice at once on one database, the same", { timeout: 90_000 }, async () => {
      const database = await createTestDatabase(serverUrl);
      try {
        await checkTwoInstances(database.url, join(dir, "agents-postgres.json"));
      } finally {
        await database.drop();
      }
    });
  });
});
