import { randomBytes } from "node:crypto";
import { Agent, createServer, type IncomingMessage, type OutgoingHttpHeaders, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type NodeHandlerOptions, toNodeHandler, type WebHandler } from "./handler.js";
import { serve } from "./serve.js";

/** A promise with its resolve function outside. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Fails with `message` instead of hanging when `promise` does not settle in time. */
async function within<T>(promise: Promise<T>, message: string, ms = 5000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${message}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

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

/**
 * Serves a hand-written WebHandler on 127.0.0.1 and reports, per exchange, when the Node
 * response closed (after the adapter's own `close` listener ran).
 */
async function start(handler: WebHandler["handler"], options: NodeHandlerOptions = {}) {
  const listener = toNodeHandler({ handler }, options);
  const closed: Promise<void>[] = [];
  const server = createServer((req, res) => {
    const done = deferred();
    closed.push(done.promise);
    res.once("close", () => setImmediate(done.resolve));
    void listener(req, res);
  });
  let connected = 0;
  server.on("connection", () => connected++);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { port, closed, connections: () => connected };
}

interface Sent {
  method?: string;
  path?: string;
  headers?: OutgoingHttpHeaders;
  chunks?: Buffer[];
}

/** Sends a request with node:http and resolves with the response once it has started. */
function send(port: number, { method = "POST", path = "/", headers = {}, chunks = [] }: Sent) {
  const client = httpRequest({ host: "127.0.0.1", port, method, path, headers });
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    client.once("response", resolve);
    client.once("error", reject);
  });
  for (const chunk of chunks) client.write(chunk);
  client.end();
  return { client, response };
}

async function readAll(response: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of response) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

describe("toNodeHandler: requests", () => {
  it("hands the handler the exact raw body bytes, invalid UTF-8 included", async () => {
    let received: Uint8Array | null = null;
    const { port } = await start(async (request) => {
      const bytes = new Uint8Array(await request.arrayBuffer());
      received = bytes;
      return new Response(bytes, { headers: { "content-type": "application/octet-stream" } });
    });
    const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const invalidUtf8 = Buffer.from([0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28, 0x8c, 0xbc, 0xff, 0xfe, 0xed, 0xa0, 0x80]);
    const bom = Buffer.from([0xef, 0xbb, 0xbf, 0x0d, 0x0a, 0x00]);
    const chunks = [bom, Buffer.from('{"payload":"'), invalidUtf8, allBytes, Buffer.from('"}')];
    const expected = Buffer.concat(chunks);

    const { response } = send(port, { headers: { "content-type": "application/json" }, chunks });
    const echoed = await readAll(await response);
    expect(Buffer.from(received ?? new Uint8Array()).equals(expected)).toBe(true);
    expect(echoed.equals(expected)).toBe(true);
  });

  it("passes a large body through unchanged, with Content-Length", async () => {
    const body = randomBytes(3 * 1024 * 1024 + 17);
    const { port } = await start(async (request) => {
      const bytes = Buffer.from(await request.arrayBuffer());
      return Response.json({ length: bytes.length, sha: (await crypto.subtle.digest("SHA-256", bytes)).byteLength, same: bytes.equals(body) });
    });
    const { response } = send(port, { headers: { "content-length": String(body.length) }, chunks: [body] });
    expect(JSON.parse((await readAll(await response)).toString())).toEqual({ length: body.length, sha: 32, same: true });
  });

  it("passes method, path, query and headers through, repeated headers included", async () => {
    let seen: { method: string; url: string; headers: [string, string][]; body: ReadableStream | null } | null = null;
    const { port } = await start(async (request) => {
      seen = { method: request.method, url: request.url, headers: [...request.headers], body: request.body };
      return new Response(null, { status: 204 });
    });
    const { response } = send(port, {
      method: "GET",
      path: "/public/v1/api/conversations/abc%20d/messages?limit=5&token_budget=10",
      headers: {
        Authorization: "Bearer svc_live_x",
        Origin: "https://app.example.com",
        // Sent as two header lines.
        "X-Repeat": ["one", "two"],
      },
    });
    expect((await response).statusCode).toBe(204);
    expect(seen).not.toBeNull();
    const { method, url, headers, body } = seen as unknown as NonNullable<typeof seen>;
    expect(method).toBe("GET");
    expect(url).toBe(`http://127.0.0.1:${port}/public/v1/api/conversations/abc%20d/messages?limit=5&token_budget=10`);
    const map = new Map(headers);
    expect(map.get("authorization")).toBe("Bearer svc_live_x");
    expect(map.get("origin")).toBe("https://app.example.com");
    expect(map.get("x-repeat")).toBe("one, two");
    expect(map.get("host")).toBe(`127.0.0.1:${port}`);
    expect(body).toBeNull();
  });

  it("builds request URLs on baseUrl when given", async () => {
    let url = "";
    const { port } = await start(
      async (request) => {
        url = request.url;
        return new Response("ok");
      },
      { baseUrl: "https://api.example.com" },
    );
    await readAll(await send(port, { method: "GET", path: "/x/y?z=1" }).response);
    expect(url).toBe("https://api.example.com/x/y?z=1");
  });
  it("keeps a keep-alive connection usable after a response that left the body unread", async () => {
    const { port, connections } = await start(async (request) => {
      if (request.headers.get("content-type") !== "application/json") {
        return Response.json({ error: { code: "unsupported_media_type" } }, { status: 415 });
      }
      return Response.json({ length: (await request.arrayBuffer()).byteLength });
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const exchange = (headers: OutgoingHttpHeaders, body: Buffer) =>
        new Promise<{ status: number; text: string }>((resolve, reject) => {
          const client = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/", headers, agent }, async (res) => {
            resolve({ status: res.statusCode ?? 0, text: (await readAll(res)).toString() });
          });
          client.once("error", reject);
          client.end(body);
        });
      const unread = await exchange({ "content-type": "multipart/form-data; boundary=x" }, randomBytes(200_000));
      expect(unread.status).toBe(415);
      const next = await exchange({ "content-type": "application/json" }, Buffer.from('{"payload":"hi"}'));
      expect(next).toEqual({ status: 200, text: '{"length":16}' });
      expect(connections()).toBe(1);
    } finally {
      agent.destroy();
    }
  });
});

describe("toNodeHandler: responses", () => {
  it("passes status, status text, headers and several Set-Cookie headers through", async () => {
    const { port } = await start(async () => {
      const headers = new Headers({ "content-type": "application/json; charset=utf-8", "x-custom": "value" });
      headers.append("set-cookie", "a=1; Path=/");
      headers.append("set-cookie", "b=2; HttpOnly");
      headers.append("vary", "Origin");
      headers.append("vary", "Accept");
      return new Response('{"ok":true}', { status: 418, statusText: "I Am A Teapot", headers });
    });
    const response = await send(port, { method: "GET" }).response;
    expect(response.statusCode).toBe(418);
    expect(response.statusMessage).toBe("I Am A Teapot");
    expect(response.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(response.headers["x-custom"]).toBe("value");
    expect(response.headers["set-cookie"]).toEqual(["a=1; Path=/", "b=2; HttpOnly"]);
    expect(response.headers.vary).toBe("Origin, Accept");
    expect((await readAll(response)).toString()).toBe('{"ok":true}');
  });

  it("answers 500 runtime_error in the envelope when the handler throws", async () => {
    const { port } = await start(async () => {
      throw new Error("bug");
    });
    const response = await send(port, { method: "GET" }).response;
    expect(response.statusCode).toBe(500);
    expect(JSON.parse((await readAll(response)).toString())).toEqual({
      error: { code: "runtime_error", message: "An unexpected error occurred in the service." },
    });
  });

  it("cuts the connection when the body fails after the status was sent", async () => {
    const { port } = await start(async () => {
      let sent = false;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent) throw new Error("storage down");
          sent = true;
          controller.enqueue(new TextEncoder().encode("data: partial\n\n"));
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const response = await send(port, { method: "GET" }).response;
    expect(response.statusCode).toBe(200);
    // A cut connection is the only failure signal left; a clean end would read as success.
    await expect(within(readAll(response), "the response neither ended nor failed")).rejects.toThrow();
  });

  it.each(["text/event-stream; charset=utf-8", "application/x-ndjson"])("streams a %s body as it is produced, not after it ends", async (contentType) => {
    const arrivals: string[] = [];
    const firstArrived = deferred();
    const produced: string[] = [];
    const { port } = await start(async () => {
      let step = 0;
      const body = new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            step++;
            if (step === 1) {
              produced.push("first");
              controller.enqueue(new TextEncoder().encode("first\n"));
            } else if (step === 2) {
              // The rest is produced only once the client holds the first chunk.
              await firstArrived.promise;
              produced.push("second");
              controller.enqueue(new TextEncoder().encode("second\n"));
            } else {
              produced.push("end");
              controller.close();
            }
          },
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { headers: { "content-type": contentType } });
    });
    const response = await send(port, { method: "GET" }).response;
    const started = performance.now();
    const times: Record<string, number> = {};
    response.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      arrivals.push(text);
      if (text.includes("first")) {
        times.first = performance.now() - started;
        expect(produced).toEqual(["first"]);
        firstArrived.resolve();
      }
    });
    await within(new Promise((resolve) => response.on("end", resolve)), "the first chunk was held back until the stream ended");
    times.end = performance.now() - started;
    expect(arrivals.join("")).toBe("first\nsecond\n");
    expect(arrivals[0]).toBe("first\n");
    expect(produced).toEqual(["first", "second", "end"]);
    expect(times.first).toBeLessThanOrEqual(times.end as number);
  });

  it("sends the headers of an event stream before its first event", async () => {
    const headersArrived = deferred();
    const { port } = await start(async () => {
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          await headersArrived.promise;
          controller.enqueue(new TextEncoder().encode("data: {}\n\n"));
          controller.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const response = await within(send(port, { method: "GET" }).response, "headers were held back until the first event");
    expect(response.headers["content-type"]).toBe("text/event-stream");
    headersArrived.resolve();
    expect((await readAll(response)).toString()).toBe("data: {}\n\n");
  });
});

describe("toNodeHandler: disconnects and back-pressure", () => {
  it("aborts request.signal and cancels the response stream when the client goes away mid-stream", async () => {
    const aborted = deferred<unknown>();
    const cancelled = deferred<unknown>();
    let signal: AbortSignal | null = null;
    const { port } = await start(async (request) => {
      signal = request.signal;
      request.signal.addEventListener("abort", () => aborted.resolve(request.signal.reason), { once: true });
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("data: one\n\n"));
        },
        pull: () => new Promise<void>(() => undefined),
        cancel: (reason) => cancelled.resolve(reason),
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const { client, response } = send(port, { method: "GET" });
    const res = await response;
    await new Promise<void>((resolve) => res.once("data", () => resolve()));
    expect((signal as AbortSignal | null)?.aborted).toBe(false);
    client.destroy();
    const reason = await within(aborted.promise, "request.signal was not aborted");
    expect((reason as Error).message).toBe("client disconnected");
    await within(cancelled.promise, "the response stream was not cancelled");
  });

  it("aborts request.signal when the client goes away before the handler answers", async () => {
    const handling = deferred();
    const aborted = deferred();
    const { port, closed } = await start(async (request) => {
      handling.resolve();
      await new Promise<void>((resolve) => request.signal.addEventListener("abort", () => resolve(), { once: true }));
      aborted.resolve();
      return new Response("too late");
    });
    const { client, response } = send(port, { method: "POST", chunks: [Buffer.from("{}")] });
    response.catch(() => undefined);
    await within(handling.promise, "the handler was not called");
    client.destroy();
    await within(aborted.promise, "request.signal was not aborted");
    await within(closed[0] as Promise<void>, "the exchange did not close");
  });

  it("cancels the response stream of a client that went away before the handler answered with it", async () => {
    const cancelled = deferred<unknown>();
    const { port, closed } = await start(async (request) => {
      // The answer is a stream made once the client is gone: nothing will ever read it.
      await new Promise<void>((resolve) => request.signal.addEventListener("abort", () => resolve(), { once: true }));
      await new Promise((resolve) => setTimeout(resolve, 20));
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("data: one\n\n"));
        },
        pull: () => new Promise<void>(() => undefined),
        cancel: (reason) => cancelled.resolve(reason),
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const { client, response } = send(port, { method: "POST", chunks: [Buffer.from("{}")] });
    response.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 50));
    client.destroy();
    await within(closed[0] as Promise<void>, "the exchange did not close");
    // Else the stream's producer (a run) would wait for a reader forever, holding its conversation's turn.
    await within(cancelled.promise, "the response stream was not cancelled");
  });

  it("does not abort request.signal after a complete exchange", async () => {
    let signal: AbortSignal | null = null;
    const { port, closed } = await start(async (request) => {
      signal = request.signal;
      await request.arrayBuffer();
      return new Response("done");
    });
    const response = await send(port, { chunks: [Buffer.from("x")] }).response;
    expect((await readAll(response)).toString()).toBe("done");
    await within(closed[0] as Promise<void>, "the exchange did not close");
    expect((signal as AbortSignal | null)?.aborted).toBe(false);
  });

  it("stops pulling the handler's stream while the client does not read, and resumes when it does", async () => {
    const CHUNK = 64 * 1024;
    const TOTAL = 640; // 40 MiB if nothing held the producer back
    let pulls = 0;
    const { port } = await start(async () => {
      const body = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            if (pulls === TOTAL) return controller.close();
            pulls++;
            controller.enqueue(new Uint8Array(CHUNK).fill(pulls % 251));
          },
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { headers: { "content-type": "application/octet-stream" } });
    });
    const response = await send(port, { method: "GET" }).response;
    // The client reads nothing: wait until the producer stops advancing (socket buffers full).
    let last = -1;
    let unchanged = 0;
    for (let waited = 0; unchanged < 6 && waited < 100; waited++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      unchanged = pulls === last ? unchanged + 1 : 0;
      last = pulls;
    }
    const pausedAt = pulls;
    expect(pausedAt).toBeGreaterThan(0);
    // Only what fits in the socket buffers was produced: far from all of it.
    expect(pausedAt).toBeLessThan(TOTAL / 4);

    let bytes = 0;
    response.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
    });
    await within(new Promise((resolve) => response.on("end", resolve)), "the stream did not resume");
    expect(pulls).toBe(TOTAL);
    expect(bytes).toBe(TOTAL * CHUNK);
  });
});

describe("serve", () => {
  it("listens on a free port with port 0 and reports its real URL", async () => {
    const running = await serve({ handler: async (request) => new Response(new URL(request.url).pathname) }, { port: 0 });
    try {
      expect(running.port).toBeGreaterThan(0);
      expect(running.url).toBe(`http://127.0.0.1:${running.port}`);
      expect(await (await fetch(`${running.url}/hello`)).text()).toBe("/hello");
    } finally {
      await running.close();
    }
  });
});
