import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from "node:http";
import { type AddressInfo, connect } from "node:net";
import type { IncomingRequest, Reply, ReplyStream } from "@channelkit/core/adapter";
import { afterEach, describe, expect, it } from "vitest";
import { toNodeHandler } from "./handler.js";
import { NodeIncomingRequest } from "./request.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (server) =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    ),
  );
});

/** Serves a hand-written `dispatch` (and a `handler` that must not be called) on 127.0.0.1. */
async function start(dispatch: (request: IncomingRequest) => Promise<Reply>) {
  const handler = async (): Promise<Response> => {
    throw new Error("the Web handler must not be used when dispatch exists");
  };
  const server = createServer(toNodeHandler({ handler, dispatch }));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** Sends a request, writing `chunks` `gapMs` apart, and reads the whole answer. */
function exchange(port: number, options: { method?: string; headers?: Record<string, string>; chunks?: string[]; gapMs?: number } = {}) {
  return new Promise<{ status: number; headers: IncomingMessage["headers"]; body: string }>((resolve, reject) => {
    const client = httpRequest({ host: "127.0.0.1", port, method: options.method ?? "POST", path: "/x?y=1", headers: options.headers });
    client.once("error", reject);
    client.once("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.once("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    const chunks = [...(options.chunks ?? [])];
    const next = () => {
      const chunk = chunks.shift();
      if (chunk === undefined) return void client.end();
      client.write(chunk);
      setTimeout(next, options.gapMs ?? 0);
    };
    next();
  });
}

const text = (request: IncomingRequest) => request.arrayBuffer().then((bytes) => new TextDecoder().decode(bytes));

describe("toNodeHandler with dispatch: the request", () => {
  it("hands over method, absolute URL, headers and the exact body, in one packet or several", async () => {
    const seen: unknown[] = [];
    const port = await start(async (request) => {
      seen.push([request.method, request.url, request.headers.get("x-test"), await text(request)]);
      return { status: 200, headers: {}, body: "ok" };
    });
    await exchange(port, { headers: { "x-test": "a", "content-length": "9" }, chunks: ['{"a": 1 }'] });
    await exchange(port, { headers: { "x-test": "b", "content-length": "9" }, chunks: ['{"a"', ": 1 }"], gapMs: 30 });
    await exchange(port, { headers: { "x-test": "c" }, chunks: ["chun", "ked"], gapMs: 10 });
    expect(seen).toEqual([
      ["POST", `http://127.0.0.1:${port}/x?y=1`, "a", '{"a": 1 }'],
      ["POST", `http://127.0.0.1:${port}/x?y=1`, "b", '{"a": 1 }'],
      ["POST", `http://127.0.0.1:${port}/x?y=1`, "c", "chunked"],
    ]);
  });

  it("gives the same body stream each time it is asked, and refuses a second read", async () => {
    const seen: unknown[] = [];
    const port = await start(async (request) => {
      const stream = request.body;
      seen.push(stream === request.body);
      seen.push(await new Response(stream).text());
      seen.push(
        await request.arrayBuffer().then(
          () => "read twice",
          () => "refused",
        ),
      );
      return { status: 204, headers: {}, body: null };
    });
    const answer = await exchange(port, { chunks: ["abc", "def"], gapMs: 5 });
    expect(answer.status).toBe(204);
    expect(seen).toEqual([true, "abcdef", "refused"]);
  });

  it("has no body on GET", async () => {
    const seen: unknown[] = [];
    const port = await start(async (request) => {
      seen.push(request.body, (await request.arrayBuffer()).byteLength);
      return { status: 200, headers: {}, body: "" };
    });
    await exchange(port, { method: "GET" });
    expect(seen).toEqual([null, 0]);
  });
});

describe("NodeIncomingRequest: a body of a declared length", () => {
  /** Serves `listener` on 127.0.0.1, with the options node:http is given. */
  async function listen(listener: (req: IncomingMessage, res: ServerResponse) => void, options: ServerOptions = {}) {
    const server = createServer(options, listener);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return (server.address() as AddressInfo).port;
  }

  it("is handed over at its last byte, before node:http ends the request", async () => {
    const seen: unknown[] = [];
    const port = await listen(async (req, res) => {
      const body = await new NodeIncomingRequest(req, res).bytes();
      // The message's end comes after the last byte's own callback (docs/benchmarks.md).
      seen.push(Buffer.from(body).toString(), req.complete);
      res.end();
    });
    await exchange(port, { headers: { "content-length": "9" }, chunks: ['{"a"', ": 1 }"], gapMs: 30 });
    await exchange(port, { headers: { "content-length": "9" }, chunks: ['{"a": 1 }'] });
    expect(seen).toEqual(['{"a": 1 }', false, '{"a": 1 }', false]);
  });

  it("is read to its end when chunked, and when a lenient parser got both a length and chunks", async () => {
    const seen: unknown[] = [];
    const port = await listen(
      async (req, res) => {
        seen.push(Buffer.from(await new NodeIncomingRequest(req, res).bytes()).toString());
        res.end();
      },
      { insecureHTTPParser: true },
    );
    await exchange(port, { chunks: ["chun", "ked"], gapMs: 10 });
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.end(
          "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        );
      });
      let text = "";
      socket.on("data", (chunk) => {
        text += chunk;
      });
      socket.once("end", () => resolve(text));
      socket.once("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    expect(seen).toEqual(["chunked", "hello world"]);
  });
});

describe("toNodeHandler with dispatch: the reply", () => {
  it("writes strings and bytes whole with their length, and no body as none", async () => {
    const replies: Reply[] = [
      { status: 201, headers: { "content-type": "application/json; charset=utf-8" }, body: '{"é":1}' },
      { status: 200, headers: { "x-many": ["a", "b"] }, body: new TextEncoder().encode("bytes") },
      { status: 204, statusText: "Nothing Here", headers: { "x-a": "1" }, body: null },
    ];
    const port = await start(async () => replies.shift() as Reply);
    const json = await exchange(port);
    expect(json).toMatchObject({ status: 201, body: '{"é":1}' });
    expect(json.headers["content-length"]).toBe(String(Buffer.byteLength('{"é":1}')));
    expect(json.headers["transfer-encoding"]).toBeUndefined();
    const bytes = await exchange(port);
    expect(bytes).toMatchObject({ status: 200, body: "bytes" });
    expect(bytes.headers["x-many"]).toBe("a, b");
    const empty = await exchange(port);
    expect(empty).toMatchObject({ status: 204, body: "" });
    expect(empty.headers["x-a"]).toBe("1");
  });

  it("streams a ReplyStream chunk by chunk, and cancels it when the client goes away", async () => {
    let cancelled = false;
    let pulls = 0;
    const stream = (endless: boolean): ReplyStream => {
      let n = 0;
      return {
        pull() {
          pulls++;
          n++;
          if (n === 1) return new TextEncoder().encode("first;");
          if (!endless && n > 3) return null;
          return new Promise((resolve) => setTimeout(() => resolve(new TextEncoder().encode(`${n};`)), 5));
        },
        cancel() {
          cancelled = true;
        },
      };
    };
    const port = await start(async (request) => ({
      status: 200,
      headers: { "content-type": "text/event-stream" },
      body: stream(request.headers.has("x-endless")),
    }));
    expect((await exchange(port)).body).toBe("first;2;3;");
    expect(cancelled).toBe(false);

    pulls = 0;
    await new Promise<void>((resolve) => {
      const client = httpRequest({ host: "127.0.0.1", port, method: "POST", headers: { "x-endless": "1" } });
      client.on("error", () => undefined);
      client.once("response", (res) => {
        res.once("data", () => {
          client.destroy();
          resolve();
        });
      });
      client.end();
    });
    await expect.poll(() => cancelled).toBe(true);
    const after = pulls;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(pulls).toBeLessThanOrEqual(after + 1);
  });
});

describe("toNodeHandler with dispatch: frames produced together", () => {
  /**
   * A ReplyStream of string frames: `first;`, then each of `bursts`. A burst's first frame
   * comes `gapMs` after the one before (a timer, as a model's next token would), the others
   * a microtask after it (as a flow's words that never wait); the first burst starts at once.
   */
  function frames(bursts: string[][], gapMs: number): ReplyStream {
    const queue = bursts.flatMap((burst, b) => burst.map((frame, i) => ({ frame, afterGap: b > 0 && i === 0 })));
    let first = true;
    return {
      pull() {
        if (first) {
          first = false;
          return "first;";
        }
        const next = queue.shift();
        if (!next) return Promise.resolve(null);
        if (next.afterGap) return new Promise((resolve) => setTimeout(() => resolve(next.frame), gapMs));
        return Promise.resolve(next.frame);
      },
      cancel() {},
    };
  }

  it("writes the frames of one burst in one write, and never holds a frame across a timer", async () => {
    const { ServerResponse } = await import("node:http");
    const writes: string[] = [];
    const write = ServerResponse.prototype.write;
    const end = ServerResponse.prototype.end;
    ServerResponse.prototype.write = function (this: InstanceType<typeof ServerResponse>, chunk: unknown, ...rest: unknown[]) {
      writes.push(String(chunk));
      return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof write;
    ServerResponse.prototype.end = function (this: InstanceType<typeof ServerResponse>, chunk?: unknown, ...rest: unknown[]) {
      if (typeof chunk === "string") writes.push(`end:${chunk}`);
      return (end as (...args: unknown[]) => unknown).call(this, chunk, ...rest);
    } as typeof end;
    try {
      const port = await start(async () => ({
        status: 200,
        headers: { "content-type": "text/event-stream" },
        body: frames(
          [
            ["a;", "b;", "c;"],
            ["d;", "e;"],
          ],
          30,
        ),
      }));
      expect((await exchange(port)).body).toBe("first;a;b;c;d;e;");
      // The first frame at once, each burst in one write (the last one with the end).
      expect(writes).toEqual(["first;", "a;b;c;", "end:d;e;"]);
    } finally {
      ServerResponse.prototype.write = write;
      ServerResponse.prototype.end = end;
    }
  });

  it("sends a burst's frames before the wait that follows them", async () => {
    const port = await start(async () => ({
      status: 200,
      headers: { "content-type": "text/event-stream" },
      body: frames([["a;", "b;"], ["late;"]], 300),
    }));
    const arrived = await new Promise<{ at: number; text: string }[]>((resolve, reject) => {
      const started = Date.now();
      const seen: { at: number; text: string }[] = [];
      const client = httpRequest({ host: "127.0.0.1", port, method: "POST" });
      client.once("error", reject);
      client.once("response", (res) => {
        res.setEncoding("utf8");
        res.on("data", (text: string) => seen.push({ at: Date.now() - started, text }));
        res.once("end", () => resolve(seen));
      });
      client.end();
    });
    const text = arrived.map((part) => part.text).join("");
    expect(text).toBe("first;a;b;late;");
    const b = arrived.find((part) => part.text.includes("b;")) as { at: number };
    // "b;" left with its burst, not with the frame 300 ms later.
    expect(b.at).toBeLessThan(250);
  });

  it("stops pulling string frames while the client does not read, and resumes when it does", async () => {
    const FRAME = `data: ${"x".repeat(1000)}\n\n`;
    const TOTAL = 40_000; // 40 MB if nothing held the producer back
    let pulls = 0;
    const port = await start(async () => ({
      status: 200,
      headers: { "content-type": "text/event-stream" },
      body: {
        pull() {
          if (pulls === TOTAL) return Promise.resolve(null);
          pulls++;
          // Every frame ready at once: only the socket's back-pressure can hold the producer.
          return Promise.resolve(FRAME);
        },
        cancel() {},
      },
    }));
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const client = httpRequest({ host: "127.0.0.1", port, method: "POST" });
      client.once("error", reject);
      client.once("response", resolve);
      client.end();
    });
    let last = -1;
    let unchanged = 0;
    for (let waited = 0; unchanged < 6 && waited < 100; waited++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      unchanged = pulls === last ? unchanged + 1 : 0;
      last = pulls;
    }
    expect(pulls).toBeGreaterThan(0);
    expect(pulls).toBeLessThan(TOTAL / 4);
    let bytes = 0;
    response.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
    });
    await new Promise((resolve) => response.once("end", resolve));
    expect(pulls).toBe(TOTAL);
    expect(bytes).toBe(TOTAL * FRAME.length);
  });
});

describe("toNodeHandler with dispatch: the client going away", () => {
  it("is told through onClientGone, and through signal when it is read", async () => {
    let request: IncomingRequest | undefined;
    const handling = deferred<void>();
    const gone = deferred<unknown>();
    const port = await start(async (incoming) => {
      request = incoming;
      incoming.onClientGone?.((reason) => gone.resolve(reason));
      handling.resolve();
      await gone.promise;
      return { status: 200, headers: {}, body: "too late" };
    });
    const client = httpRequest({ host: "127.0.0.1", port, method: "POST", headers: { "content-length": "2" } });
    client.on("error", () => undefined);
    client.end("{}");
    await handling.promise;
    expect(request?.onClientGone).toBeTypeOf("function");
    client.destroy();
    expect(((await gone.promise) as Error).message).toBe("client disconnected");
    // Asked for after the fact: the signal is already aborted, a late listener is called at once.
    expect(request?.signal.aborted).toBe(true);
    let late: unknown;
    request?.onClientGone?.((reason) => {
      late = reason;
    });
    expect((late as Error).message).toBe("client disconnected");
  });

  it("is not told after a complete exchange, and a listener removed in time is never called", async () => {
    const calls: string[] = [];
    let request: IncomingRequest | undefined;
    const port = await start(async (incoming) => {
      request = incoming;
      incoming.onClientGone?.(() => calls.push("kept"));
      const stop = incoming.onClientGone?.(() => calls.push("removed"));
      stop?.();
      return { status: 200, headers: {}, body: "done" };
    });
    expect((await exchange(port, { headers: { "content-length": "2" }, chunks: ["{}"] })).body).toBe("done");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls).toEqual([]);
    expect(request?.signal.aborted).toBe(false);
  });
});

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}
