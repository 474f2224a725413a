import { EventEmitter } from "node:events";
import type { IncomingMessage } from "node:http";
import { createServer, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { IncomingRequest, Reply } from "@channelkit/core/adapter";
import { afterEach, describe, expect, it } from "vitest";
import { handleNodeRequest } from "./handler.js";
import { NodeRequestHeaders } from "./headers.js";

// What an open stream keeps (docs/benchmarks.md, "Memory per open stream"), measured after
// full collections: the heap grows by the same bytes each time for the same objects kept.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

const EVENT_STREAM = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };
const FIRST = "data: first\n\n";

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function listen(listener: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(listener);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Opens `count` requests and resolves once each has its first event, with what closes them. */
async function openStreams(url: string, count: number): Promise<() => void> {
  const requests = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof request>>((resolve, reject) => {
          const req = request(url, { method: "POST", agent: false }, (res) => res.once("data", () => resolve(req)));
          req.on("error", reject);
          req.end("{}");
        }),
    ),
  );
  return () => {
    for (const req of requests) req.destroy();
  };
}

/** A service whose answer is a stream that sends one event, then waits for a run that never ends. */
const waiting = {
  handler: () => Promise.reject(new Error("dispatch is used")),
  async dispatch(_request: IncomingRequest): Promise<Reply> {
    let sent = false;
    return {
      status: 200,
      headers: { ...EVENT_STREAM },
      body: {
        pull: () => {
          if (sent) return new Promise<never>(() => undefined);
          sent = true;
          return FIRST;
        },
        cancel: () => undefined,
      },
    };
  },
};

describe("memory per open stream (docs/benchmarks.md)", () => {
  it("an open stream holds no frame of handleNodeRequest or writeReply waiting on its writer", async () => {
    const count = 5000;
    // Requests and responses of their own, made before the measurement: only what the adapter keeps counts.
    const pairs = Array.from({ length: count }, () => {
      const req = Object.assign(new EventEmitter(), { method: "POST", url: "/", headers: {}, rawHeaders: [], socket: {} });
      const res = Object.assign(new EventEmitter(), {
        destroyed: false,
        headersSent: false,
        writableFinished: false,
        socket: null,
        writeHead: () => undefined,
        flushHeaders: () => undefined,
        write: () => true,
        end: () => undefined,
        destroy: () => undefined,
      });
      return { req: req as unknown as IncomingMessage, res: res as unknown as ServerResponse };
    });
    const written: Promise<void>[] = new Array(count);
    const before = heapUsed();
    for (let i = 0; i < count; i++) written[i] = handleNodeRequest(waiting, pairs[i]?.req as IncomingMessage, pairs[i]?.res as ServerResponse);
    // The first event is written; each stream waits for its next.
    await new Promise((resolve) => setImmediate(resolve));
    const perStream = (heapUsed() - before) / count;
    // The request and its link to the client, the stream, the writer waiting on it, the close
    // listeners: about 650 bytes, against 1,100 when handleNodeRequest and writeReply awaited the writer.
    expect(perStream).toBeLessThan(900);
    expect(written.length).toBe(count);
  });

  it("listens to the response's close without once's wrapper", async () => {
    let res: ServerResponse | undefined;
    const url = await listen((req, response) => {
      res = response;
      void handleNodeRequest(waiting, req, response);
    });
    const close = await openStreams(url, 1);
    const listeners = res?.rawListeners("close") ?? [];
    // ClientLink's and the stream writer's, each the function itself.
    expect(listeners.length).toBeGreaterThanOrEqual(2);
    expect(listeners.filter((listener) => "listener" in listener)).toEqual([]);
    close();
  });

  it("headers that were read keep no map of their own", () => {
    const raw = ["Host", "127.0.0.1:3000", "Authorization", "Bearer svc_live_abc", "Content-Type", "application/json", "Accept", "*/*"];
    const count = 5000;
    const kept: NodeRequestHeaders[] = new Array(count);
    const before = heapUsed();
    for (let i = 0; i < count; i++) {
      const headers = new NodeRequestHeaders({ rawHeaders: raw } as IncomingMessage);
      expect(headers.get("authorization")).toBe("Bearer svc_live_abc");
      kept[i] = headers;
    }
    // The object and its reference to the raw headers (a map of them was about 400 bytes).
    expect((heapUsed() - before) / count).toBeLessThan(100);
    expect(kept.length).toBe(count);
  });
});
