import { createServer as createTcpServer } from "node:net";
import type { AddressInfo, Server as TcpServer } from "node:net";
import { connect } from "node:net";
import { createChannelService, defineFlow, memoryStorage, type Storage, text } from "@channelkit/core";
import { afterEach, describe, expect, it } from "vitest";
import { serve } from "./serve.js";

const quiet = { warn() {}, error() {} };
const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
});

/** A promise and what settles it. */
function later<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

describe("serve(): shutdown() drains", () => {
  it("a request on an open connection is 503 service_draining after the one in flight, which is answered; the storage closes after the last connection", async () => {
    const started = later();
    const release = later();
    const hold = defineFlow({
      name: "hold",
      async *run() {
        started.resolve();
        yield text("first. ");
        await release.promise;
        yield text("done");
      },
    });
    const storage = memoryStorage();
    const connectionsAtClose = later<number>();
    // The storage's close, watched: how many connections the server still had then.
    const watched: Storage = new Proxy(storage, {
      get(target, name) {
        if (name === "close") {
          return async () => {
            connectionsAtClose.resolve(await new Promise<number>((done) => running.server.getConnections((_error, count) => done(count))));
            return target.close();
          };
        }
        const value = Reflect.get(target, name, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const service = await createChannelService({ storage: watched, flows: [hold], logger: quiet });
    const { tenant } = await service.admin.createTenant({ name: "drain" });
    const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "hold" });
    const running = await serve(service, { port: 0 });
    cleanup.push(() => running.shutdown({ drainMs: 0 }));

    const socket = connect(running.port, "127.0.0.1");
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    const closed = new Promise<void>((done) => socket.once("close", () => done()));
    const body = JSON.stringify({ payload: "hi", stream: true });
    socket.write(
      `POST /public/v1/api/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    await started.promise;

    const refused = later();
    const done = running.shutdown({ drainMs: 60_000, onRefused: () => refused.resolve() });
    socket.write("GET /public/v1/openapi.json HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n\r\n");
    await refused.promise;
    release.resolve();
    await closed;
    await done;

    const [stream, refusal = ""] = received.split(/(?=HTTP\/1\.1 503 )/);
    expect(stream).toMatch(/^HTTP\/1\.1 200 /);
    expect(stream).toContain('"delta":"done"');
    const [head = "", answer = ""] = refusal.split("\r\n\r\n");
    expect(head.toLowerCase().split("\r\n").slice(1).sort()).toEqual([
      "access-control-allow-origin: https://app.example",
      "access-control-expose-headers: retry-after",
      "connection: close",
      `content-length: ${Buffer.byteLength(answer)}`,
      "content-type: application/json; charset=utf-8",
      expect.stringMatching(/^date: /),
      "retry-after: 1",
      "vary: origin",
    ]);
    expect(JSON.parse(answer).error.code).toBe("service_draining");
    expect(await connectionsAtClose.promise).toBe(0);
  });

  it("an idle kept-alive connection is closed at once; an answer in flight that has not begun says Connection: close", async () => {
    const release = later();
    const started = later();
    const hold = defineFlow({
      name: "hold",
      async *run() {
        started.resolve();
        await release.promise;
        yield text("done");
      },
    });
    const service = await createChannelService({ storage: memoryStorage(), flows: [hold], logger: quiet });
    const { tenant } = await service.admin.createTenant({ name: "drain" });
    const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "hold" });
    const running = await serve(service, { port: 0 });
    cleanup.push(() => running.shutdown({ drainMs: 0 }));

    const idle = connect(running.port, "127.0.0.1");
    let idleText = "";
    idle.setEncoding("utf8");
    const answered = new Promise<void>((done) =>
      idle.on("data", (chunk: string) => {
        idleText += chunk;
        if (idleText.endsWith("}}")) done();
      }),
    );
    const idleClosed = new Promise<void>((done) => idle.once("close", () => done()));
    idle.write("GET /no-such-route HTTP/1.1\r\nHost: x\r\n\r\n");
    await answered;

    const execute = fetch(`${running.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hi" }),
    });
    await started.promise;
    const done = running.shutdown({ drainMs: 60_000 });
    await idleClosed;
    release.resolve();
    const response = await execute;
    expect([response.status, response.headers.get("connection")]).toEqual([200, "close"]);
    expect(((await response.json()) as { status: string }).status).toBe("success");
    await done;
    expect(running.shutdown()).toBe(done);
  });
});

describe("serve(): a port it cannot listen on", () => {
  it("rejects with an error naming the host and port, Node's code kept", async () => {
    const taken: TcpServer = createTcpServer();
    await new Promise<void>((done) => taken.listen(0, "127.0.0.1", done));
    cleanup.push(() => new Promise((done) => taken.close(done)));
    const port = (taken.address() as AddressInfo).port;
    const service = await createChannelService({ storage: memoryStorage(), flows: [], logger: quiet });
    cleanup.push(() => service.close());
    const error = (await serve(service, { port }).catch((failure: unknown) => failure)) as NodeJS.ErrnoException;
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toBe(`serve(): 127.0.0.1:${port} is already in use: stop what listens there, or pass another port`);
    expect(error.code).toBe("EADDRINUSE");
    expect((error.cause as NodeJS.ErrnoException).code).toBe("EADDRINUSE");
  });
});
