import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { IncomingRequest, Reply, ReplyStream } from "@channelkit/core/adapter";
import { afterEach, describe, expect, it } from "vitest";
import { toNodeHandler } from "./handler.js";

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
