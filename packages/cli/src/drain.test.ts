/**
 * SIGTERM drains `channelkit serve` without a 500 (issue 41, operator finding 8): an idle
 * kept-alive connection is closed at once, a request that arrives on an open connection is
 * answered 503 `service_draining` (`Retry-After`, `Connection: close`) without running, the
 * requests in flight are answered (a JSON answer with `Connection: close`), and the storage
 * closes after the last connection, then exit 0. Each moment is observed, never waited for:
 * the flow says when it runs (a file) and waits for the test's word (another file); the
 * server's lines say when the drain began and when it refused a request.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { Agent, request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStorage } from "./storage.js";
import { ensureBuilt, killAll, makeApp, runCliJson, type ServeProcess, startServe, type TestApp } from "./test-process.js";
import { postgresDatabase, type SharedDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };

/** A flow that marks its start in `$HOLD_DIR/started-<payload>`, says one word, and waits for `$HOLD_DIR/release-<payload>`. */
const CONFIG = `import { existsSync, writeFileSync } from "node:fs";
import { defineFlow, text } from "@channelkit/core";

const dir = process.env.HOLD_DIR;
const hold = defineFlow({
  name: "hold",
  async *run(ctx) {
    const name = String(ctx.payload);
    writeFileSync(\`\${dir}/started-\${name}\`, "");
    yield text(\`first of \${name}. \`);
    while (!existsSync(\`\${dir}/release-\${name}\`)) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    yield text("done");
  },
});

export default { flows: [hold] };
`;

/** Polls `check` until it holds: a state of another process, observed. */
async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A raw connection that keeps every byte it receives and says when it closed. */
function rawConnection(url: string): { socket: Socket; text: () => string; closed: Promise<void>; connected: Promise<void> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let text = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    text += chunk;
  });
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  const connected = new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  socket.on("error", () => undefined);
  return { socket, text: () => text, closed, connected };
}

/** The status lines of every answer in what a connection received. */
function statuses(text: string): number[] {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
}

function drains(open: () => Promise<SharedDatabase>) {
  let database: SharedDatabase;
  let app: TestApp;
  let key: string;

  beforeAll(async () => {
    await ensureBuilt();
    database = await open();
    app = await makeApp({ "channelkit.config.mjs": CONFIG });
    const cli = <T>(...args: string[]) => runCliJson<T>([...args, "--db", database.db], ENV, { cwd: app.path });
    await cli("migrate");
    const { tenant } = await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Drain");
    ({ api_key: key } = await cli<{ api_key: string }>("channel", "create", "--tenant", tenant.id, "--flow", "hold"));
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await database?.drop();
    await app?.remove();
  });

  it("SIGTERM: the idle connection is closed, a request on the busy one is 503 service_draining with Retry-After and Connection: close, the requests in flight are answered, no 500, exit 0", async () => {
    const env = { ...ENV, HOLD_DIR: app.path };
    const server: ServeProcess = await startServe(["--port", "0", "--db", database.db, "--drain-ms", "60000"], env, 15_000, { cwd: app.path });
    const { host } = new URL(server.url);
    const execute = (payload: string, stream: boolean) => {
      const body = JSON.stringify({ payload, stream });
      return `POST /public/v1/api/execute HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    };

    // A: a streamed run in flight on a kept-alive connection.
    const busy = rawConnection(server.url);
    await busy.connected;
    busy.socket.write(execute("a", true));
    await until("the stream's first word", () => busy.text().includes("first of a."));
    const conversationId = /"conversation_id":"([^"]+)"/.exec(busy.text())?.[1] as string;

    // C: a JSON execute in flight through a keep-alive agent; its answer has not begun.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const json = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
      const body = JSON.stringify({ payload: "c" });
      const req = httpRequest(
        `${server.url}/public/v1/api/execute`,
        { method: "POST", agent, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            text += chunk;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: text }));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    // Awaited below; a failure before that is the test's, not an unhandled rejection.
    json.catch(() => undefined);
    await until("the JSON run's start", () => existsSync(join(app.path, "started-c")));

    // B: a kept-alive connection, idle once its answer came whole.
    const idle = rawConnection(server.url);
    await idle.connected;
    idle.socket.write(`GET /no-such-route HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    await until("the idle connection's answer", () => /\r\n\r\n\{"error":\{"code":"not_found".*\}\}$/.test(idle.text()));
    expect(idle.text()).toMatch(/^HTTP\/1\.1 404 /);
    expect(idle.text().toLowerCase()).toContain("connection: keep-alive");
    const idleReceived = idle.text();

    server.child.kill("SIGTERM");
    await until("the drain's line", () => server.lines.includes("SIGTERM: stopping; runs in flight have 60000 ms to finish (--drain-ms)"));

    // The idle connection is closed at once, with nothing more said on it.
    await idle.closed;
    expect(idle.text()).toBe(idleReceived);
    // No new connection is accepted.
    const fresh = rawConnection(server.url);
    await expect(fresh.connected).rejects.toMatchObject({ code: "ECONNREFUSED" });

    // A request arriving on the busy connection is refused, not run: answered after the stream.
    busy.socket.write(`GET /public/v1/api/conversations/${conversationId}/messages HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    await until("the refusal's line", () => server.lines.some((line) => line.startsWith("SIGTERM: a request arrived on an open connection while draining")));

    // The runs in flight finish.
    await writeFile(join(app.path, "release-a"), "");
    await writeFile(join(app.path, "release-c"), "");
    await busy.closed;
    const [stream, refusal] = busy.text().split(/(?=HTTP\/1\.1 503 )/);
    expect(statuses(busy.text())).toEqual([200, 503]);
    expect(stream).toContain('"delta":"done"');
    expect(stream).toMatch(/"type":"finish"/);
    const head = (refusal as string).split("\r\n\r\n")[0]?.toLowerCase() as string;
    expect(head).toContain("retry-after: 1");
    expect(head).toContain("connection: close");
    expect(JSON.parse((refusal as string).split("\r\n\r\n")[1] as string)).toEqual({
      error: { code: "service_draining", message: expect.stringContaining("shutting down") },
    });

    // The JSON answer that had not begun is told to close its connection.
    const answered = await json;
    expect([answered.status, answered.connection, JSON.parse(answered.body).status]).toEqual([200, "close", "success"]);
    agent.destroy();

    expect(await server.exited).toBe(0);
    expect(server.lines).toContain("SIGTERM: stopped; 1 request(s) that arrived while draining were answered 503 service_draining");
    expect(server.stderr()).not.toMatch(/runtime_error|not open|after calling end|Error/);

    // Both runs were stored whole before the storage closed; the refused request left nothing.
    const storage = await openStorage(database.db);
    try {
      const history = await storage.listMessagesAfter(conversationId, -1, 10);
      expect(history.map((message) => [message.role, message.content])).toEqual([
        ["user", "a"],
        ["assistant", "first of a. done"],
      ]);
    } finally {
      await storage.close();
    }
  }, 60_000);
}

describe("channelkit serve drains on SIGTERM, on SQLite", () => {
  drains(() => sqliteDatabase("drain"));
});

describeWithPostgres("channelkit serve drains on SIGTERM, on Postgres", (serverUrl) => {
  drains(() => postgresDatabase(serverUrl));
});
