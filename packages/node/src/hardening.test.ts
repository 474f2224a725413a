/**
 * What a black-box fuzz run of bad requests found (issue 16), each over real HTTP on
 * 127.0.0.1 through `serve`: raw sockets where a well-behaved client could not send it.
 */
import { connect, type Socket } from "node:net";
import { type ChannelService, createChannelService, defineFlow, memoryStorage, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

const errors: unknown[][] = [];
let service: ChannelService;
let server: RunningServer;
let key: string;
/** A server key of a channel whose flow answers after 100 ms: a request still being answered. */
let delayedKey: string;
let port: number;

const delayed = defineFlow({
  name: "delayed",
  async *run(ctx) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    yield text(`Later: ${ctx.payload}`);
    return null;
  },
});

beforeAll(async () => {
  service = await createChannelService({
    storage: memoryStorage(),
    flows: [...demoFlows, delayed],
    logger: { warn: () => undefined, error: (...args) => void errors.push(args) },
  });
  const { tenant } = await service.admin.createTenant({ name: "Hardening" });
  key = (await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", mode: "public", allowedOrigins: ["https://shop.example"] })).api_key;
  delayedKey = (await service.admin.createChannel({ tenantId: tenant.id, flow: "delayed" })).api_key;
  server = await serve(service, { port: 0, headersTimeoutMs: 500, requestTimeoutMs: 1000 });
  port = server.port;
});

afterAll(async () => {
  server.server.closeAllConnections();
  await server.close();
  await service.close();
});

/** Sends raw bytes on a new connection and resolves with everything the server wrote before it closed. */
function raw(bytes: string | Buffer, { end = true, ms = 5000 } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${ms} ms: ${answer}`));
    }, ms);
    socket.on("data", (chunk) => {
      answer += chunk.toString("utf8");
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(answer);
    });
    socket.on("error", () => undefined);
    socket.write(bytes);
    if (end) socket.end();
  });
}

function statusOf(answer: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
}

function bodyOf(answer: string): string {
  return answer.slice(answer.indexOf("\r\n\r\n") + 4);
}

const execute = (body: string, headers: Record<string, string> = {}) =>
  fetch(`${server.url}/public/v1/api/execute`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body,
  });

describe("a malformed Host header", () => {
  it("does not make a 500 on any route, the preflight included, and nothing is logged", async () => {
    for (const host of ["", "a b", "[::1", "localhost:99999", "%", "a^b"]) {
      const preflight = await raw(`OPTIONS /public/v1/api/execute HTTP/1.1\r\nHost: ${host}\r\nOrigin: https://shop.example\r\nConnection: close\r\n\r\n`);
      expect(statusOf(preflight), `${JSON.stringify(host)}: ${preflight}`).toBe(204);
      const unauthenticated = await raw(`POST /public/v1/api/execute HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
      expect(statusOf(unauthenticated), unauthenticated).toBe(401);
      const history = await raw(
        `GET /public/v1/api/conversations/${crypto.randomUUID()}/messages HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(history), history).toBe(404);
    }
    expect(errors).toEqual([]);
  });
});

describe("JSON bodies", () => {
  it("nesting deeper than 32 levels is a 422, read without parsing it", async () => {
    const deep = `{"payload":"hi","metadata":{"a":${"[".repeat(500_000)}${"]".repeat(500_000)}}}`;
    const response = await execute(deep);
    expect(response.status).toBe(422);
    expect(await response.json()).toMatchObject({ error: { code: "validation_error", message: expect.stringContaining("nested deeper than 32 levels") } });
    const shallow = await execute(JSON.stringify({ payload: "hi", metadata: { a: [[[[{ b: "[[[[[[" }]]]] } }));
    expect(shallow.status).toBe(200);
  });

  it("metadata of more than 16 KiB of JSON is a 422", async () => {
    const response = await execute(JSON.stringify({ payload: "hi", metadata: { notes: "x".repeat(17_000) } }));
    expect(response.status).toBe(422);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain("metadata must be at most 16384 characters");
  });

  it("a lone surrogate is a 422; a well-formed astral character is stored and answered as sent", async () => {
    for (const body of ['{"payload":"a\\ud800b"}', '{"payload":"ok","metadata":{"k\\udc00":1}}']) {
      const response = await execute(body);
      expect(response.status, body).toBe(422);
      expect(((await response.json()) as { error: { message: string } }).error.message).toContain("lone surrogate");
    }
    const astral = await execute('{"payload":"a\\ud83d\\ude00b"}');
    const run = (await astral.json()) as { conversation_id: string; output: { messages: { content: string }[] } };
    expect(run.output.messages[0]?.content).toBe("Echo: a😀b");
    const history = (await (
      await fetch(`${server.url}/public/v1/api/conversations/${run.conversation_id}/messages`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { messages: { content: string }[] };
    expect(history.messages.map((m) => m.content)).toEqual(["a😀b", "Echo: a😀b"]);
  });
});

describe("Origin", () => {
  it("one rule for the preflight and every other answer: an ASCII origin is reflected, a non-ASCII one never", async () => {
    const utf8Origin = Buffer.from("Origin: https://bücher.example\r\n", "utf8");
    const request = (method: string, path: string, extra: string) =>
      Buffer.concat([
        Buffer.from(`${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${extra}`),
        utf8Origin,
        Buffer.from(method === "POST" ? "Content-Length: 2\r\n\r\n{}" : "\r\n"),
      ]);
    const preflight = await raw(request("OPTIONS", "/public/v1/api/execute", ""));
    const refused = await raw(request("POST", "/public/v1/api/execute", `Authorization: Bearer ${key}\r\nContent-Type: application/json\r\n`));
    expect(statusOf(preflight)).toBe(204);
    expect(preflight.toLowerCase()).not.toContain("access-control-allow-origin");
    expect(statusOf(refused)).toBe(403);
    expect(refused.toLowerCase()).not.toContain("access-control-allow-origin");
    const allowed = await fetch(`${server.url}/public/v1/api/execute`, { method: "OPTIONS", headers: { origin: "https://shop.example" } });
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://shop.example");
  });
});

describe("the client's own failures", () => {
  it("an upload aborted midway is not logged as an error of the service, and the server goes on", async () => {
    const before = errors.length;
    await new Promise<void>((resolve) => {
      const socket: Socket = connect(port, "127.0.0.1", () => {
        socket.write(
          `POST /public/v1/api/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"payload":`,
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 100);
      });
    });
    const chunked = await raw(
      `POST /public/v1/api/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nnot a chunk\r\n`,
    );
    expect([0, 400]).toContain(Number.isNaN(statusOf(chunked)) ? 0 : statusOf(chunked));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(errors.slice(before)).toEqual([]);
    expect((await execute('{"payload":"still here"}')).status).toBe(200);
  });

  it("what Node's parser refuses is answered in the envelope: a bad method, 64 KB of headers, obs-fold, Content-Length with Transfer-Encoding", async () => {
    const cases: [string, number, string][] = [
      ["GE T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_request"],
      [`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(70_000)}\r\n\r\n`, 431, "headers_too_large"],
      ["GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", 400, "bad_request"],
      ["POST /public/v1/api/execute HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", 400, "bad_request"],
    ];
    for (const [request, status, code] of cases) {
      const answer = await raw(request);
      expect(statusOf(answer), request.slice(0, 40)).toBe(status);
      expect(answer.toLowerCase()).toContain("content-type: application/json");
      expect(JSON.parse(bodyOf(answer))).toMatchObject({ error: { code } });
    }
  });
});

describe("one answer per request, on connections that go wrong", () => {
  it("a valid request followed on its connection by bytes that are not HTTP gets its own answer, then the 400, then the connection closes", async () => {
    const body = '{"payload":"piped"}';
    const answer = await raw(
      `POST /public/v1/api/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${delayedKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}GARBAGE\r\n\r\n`,
      { end: false },
    );
    expect(statusOf(answer)).toBe(200);
    expect(answer).toContain('"content":"Later: piped"');
    // The bad request's answer, if any, comes after the first one's.
    expect(answer.indexOf("HTTP/1.1 400")).not.toBe(0);
  });

  it("an HTTP/1.1 request without Host is 400 in the envelope; an HTTP/1.0 one needs none", async () => {
    const answer = await raw("GET /public/widget/config HTTP/1.1\r\n\r\n", { end: false });
    expect(statusOf(answer)).toBe(400);
    expect(JSON.parse(bodyOf(answer))).toMatchObject({ error: { code: "bad_request" } });
    const old = await raw(`GET /public/widget/config HTTP/1.0\r\nAuthorization: Bearer ${key}\r\n\r\n`, { end: false });
    expect(old).toMatch(/^HTTP\/1\.1 200/);
  });

  it("a CONNECT is refused in the envelope (405), not met with a closed socket", async () => {
    const answer = await raw("CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n", { end: false });
    expect(statusOf(answer)).toBe(405);
    expect(JSON.parse(bodyOf(answer))).toMatchObject({ error: { code: "method_not_allowed" } });
  });

  it("a body refused with 413 before it all arrived closes the connection: no second answer when the rest never comes", async () => {
    const answer = await raw(
      `POST /public/v1/api/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{"payload":"`,
      { end: false, ms: 3000 },
    );
    expect(statusOf(answer)).toBe(413);
    expect(answer.toLowerCase()).toContain("connection: close");
    // Before, the connection stayed open to drain the body and answered its read timeout (408) to the same request.
    expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1);
  });
});

describe("slow clients", () => {
  it("headers trickling in are cut with 408 after headersTimeoutMs, while two hundred of them do not stop a normal client", async () => {
    const sockets: Socket[] = [];
    const answers: Promise<string>[] = [];
    for (let i = 0; i < 200; i++) {
      answers.push(
        new Promise((resolve) => {
          const socket = connect(port, "127.0.0.1", () => socket.write("GET /public/widget/config HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
          let answer = "";
          let reset = false;
          socket.on("data", (chunk) => {
            answer += chunk.toString();
          });
          // A header line written as the server closes the connection is answered with a reset,
          // which on a loaded machine can discard the 408 not yet read: the connection was cut all the same.
          socket.on("close", () => resolve(answer === "" && reset ? "reset" : answer));
          socket.on("error", (error: NodeJS.ErrnoException) => {
            reset = error.code === "ECONNRESET" || error.code === "EPIPE";
          });
          sockets.push(socket);
        }),
      );
    }
    const trickle = setInterval(() => {
      for (const socket of sockets) if (!socket.destroyed) socket.write("X-Slow: 1\r\n");
    }, 100);
    try {
      const normal = await execute('{"payload":"served"}');
      expect(normal.status).toBe(200);
      const cut = await Promise.all(answers);
      const timedOut = cut.filter((answer) => statusOf(answer) === 408 && answer.includes('"request_timeout"'));
      expect(cut.filter((answer) => answer !== "reset" && !timedOut.includes(answer))).toEqual([]);
      expect(timedOut.length).toBeGreaterThan(0);
    } finally {
      clearInterval(trickle);
      for (const socket of sockets) socket.destroy();
    }
  });

  it("a body that never finishes arriving is cut with 408 after requestTimeoutMs", async () => {
    const started = Date.now();
    const answer = await raw(
      `POST /public/v1/api/execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"pay`,
      { end: false },
    );
    expect(statusOf(answer)).toBe(408);
    expect(Date.now() - started).toBeLessThan(3500);
  });
});

describe("conversation ids", () => {
  it("compare case-insensitively: the upper-case form of a conversation's UUID names it", async () => {
    const first = (await (await execute('{"payload":"one"}')).json()) as { conversation_id: string };
    const upper = first.conversation_id.toUpperCase();
    const second = (await (await execute(JSON.stringify({ payload: "two", conversation_id: upper }))).json()) as { conversation_id: string };
    expect(second.conversation_id).toBe(first.conversation_id);
    const history = await fetch(`${server.url}/public/v1/api/conversations/${upper}/messages`, { headers: { authorization: `Bearer ${key}` } });
    expect(history.status).toBe(200);
    // interface.md: `session_id` is an echo of the path parameter, as written.
    expect(((await history.json()) as { session_id: string; total_messages: number }).session_id).toBe(upper);
  });
});
