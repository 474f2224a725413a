import { connect, type Socket } from "node:net";
import type { ChannelServiceOptions } from "@channelkit/core";
import {
  describeWithPostgres,
  OpenApiConformance,
  postgresTestStore,
  type RunningTarget,
  serviceTarget,
  sqliteTestStore,
  type TestStore,
} from "@channelkit/testkit";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "./serve.js";

/** Small caps, so that a test opens few streams: per key, and per client address (behind one trusted proxy). */
const PER_KEY = 3;
const PER_ADDRESS = 2;
const CAPPED: Partial<ChannelServiceOptions> = { streamLimits: { perKey: PER_KEY, perAddress: PER_ADDRESS }, trustProxy: 1 };
const APP = "https://caps.example";

const conformance = new OpenApiConformance();

/** An open stream: its answer, and how its client leaves. */
interface Held {
  response: Response;
  leave(): void;
}

function capTests(name: string, store: () => Promise<TestStore>): void {
  describe(`caps on open streams: ${name}`, () => {
    let target: RunningTarget;
    beforeAll(async () => {
      target = await serviceTarget({ name, store, listen: (service) => serve(service, { port: 0 }), service: CAPPED }).start({});
    });
    afterAll(() => target?.close());

    async function channel(mode: "server" | "public" = "server", flow = "echo") {
      const { tenant } = await target.admin.createTenant({ name: "caps" });
      const created = await target.admin.createChannel({ tenantId: tenant.id, flow, mode, allowedOrigins: [APP] });
      return { key: created.api_key, tenantId: tenant.id };
    }

    async function conversation(key: string): Promise<string> {
      const response = await fetch(`${target.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ payload: "hi", stream: false }),
      });
      expect(response.status).toBe(200);
      return ((await response.json()) as { conversation_id: string }).conversation_id;
    }

    /** Opens `GET path`, held open until `leave()`; the head is read, nothing more. */
    async function open(path: string, headers: Record<string, string>): Promise<Held> {
      const aborter = new AbortController();
      const response = await fetch(`${target.url}${path}`, { headers, signal: aborter.signal });
      return { response, leave: () => aborter.abort() };
    }

    /** Asserts a 429 `too_many_streams` in the envelope with `Retry-After`, as the OpenAPI document describes it. */
    async function refused(method: string, path: string, response: Response): Promise<void> {
      const violations: string[] = [];
      const checked = await conformance.inspect(method, path, response.clone(), (violation) => violations.push(violation));
      await checked.text();
      expect(violations).toEqual([]);
      expect(response.status).toBe(429);
      expect(response.headers.get("retry-after")).toBe("5");
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("too_many_streams");
      expect(body.error.message).toMatch(/at most \d+ at once/);
    }

    /** Sends until served, as a client retrying after a refusal does: a slot comes back once the server hears its client left. */
    async function untilServed<T extends { response: Response }>(send: () => Promise<T>): Promise<T> {
      const deadline = Date.now() + 5000;
      for (;;) {
        const sent = await send();
        if (sent.response.status !== 429 || Date.now() > deadline) return sent;
        await sent.response.text();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    const openOnceFreed = (path: string, headers: Record<string, string>) => untilServed(() => open(path, headers));

    it("a key past its cap of live-chat subscriptions is 429 too_many_streams with Retry-After, also for a streamed execute; a JSON execute and another key are served; a client that leaves gives its slot back", async () => {
      const capped = await channel();
      const other = await channel();
      const id = await conversation(capped.key);
      const events = `/public/v1/api/conversations/${id}/events`;
      const auth = { authorization: `Bearer ${capped.key}` };
      const held: Held[] = [];
      for (let i = 0; i < PER_KEY; i++) {
        held.push(await open(events, auth));
        expect(held[i]?.response.status).toBe(200);
      }
      await refused("GET", events, (await open(events, auth)).response);
      // A streamed run holds its connection as long: refused before it runs.
      const streamed = await fetch(`${target.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ payload: "hi", stream: true, conversation_id: id }),
      });
      await refused("POST", "/public/v1/api/execute", streamed);
      // An answer that does not stay open is not counted.
      await conversation(capped.key);
      // Another key is served.
      const elsewhere = await open(`/public/v1/api/conversations/${await conversation(other.key)}/events`, { authorization: `Bearer ${other.key}` });
      expect(elsewhere.response.status).toBe(200);
      elsewhere.leave();

      held[0]?.leave();
      const again = await openOnceFreed(events, auth);
      expect(again.response.status).toBe(200);
      for (const stream of [...held, again]) stream.leave();
    });

    it("a client address past its cap is refused on a publishable key, another address of the same key is served up to the key's cap; a widget chat counts, and a finished one gives its slot back", async () => {
      const site = await channel("public", "echo");
      const id = await conversation(site.key);
      const events = `/public/v1/api/conversations/${id}/events`;
      const from = (address: string) => ({ authorization: `Bearer ${site.key}`, origin: APP, "x-forwarded-for": address });
      const held = [await open(events, from("198.51.100.1")), await open(events, from("198.51.100.1"))];
      for (const stream of held) expect(stream.response.status).toBe(200);
      const refusal = (await open(events, from("198.51.100.1"))).response;
      // A page's script can read when to retry.
      expect(refusal.headers.get("access-control-expose-headers")).toMatch(/Retry-After/);
      await refused("GET", events, refusal);
      held.push(await open(events, from("198.51.100.2")));
      expect(held[2]?.response.status).toBe(200);
      // The key's cap is reached, whatever the address.
      await refused("GET", events, (await open(events, from("198.51.100.3"))).response);
      for (const stream of held) stream.leave();

      const chat = () =>
        fetch(`${target.url}/public/widget/chat`, {
          method: "POST",
          headers: { ...from("198.51.100.6"), "content-type": "application/json" },
          body: JSON.stringify({ payload: "hi" }),
        });
      // Two chats run to their end: each gives its slot back as it ends.
      for (let i = 0; i < 2; i++) {
        // The first waits for the key's slots that the clients above gave back.
        const { response: answer } = await untilServed(async () => ({ response: await chat() }));
        expect(answer.status).toBe(200);
        expect(await answer.text()).toContain(`"type":"finish"`);
      }
      const again = [await openOnceFreed(events, from("198.51.100.6")), await openOnceFreed(events, from("198.51.100.6"))];
      for (const stream of again) expect(stream.response.status).toBe(200);
      await refused("POST", "/public/widget/chat", await chat());
      for (const stream of again) stream.leave();
    });

    it("an agent past its cap of inbox feeds is 429 too_many_streams; another agent of the tenant is served", async () => {
      const { tenantId } = await channel();
      const token = (subject: string) =>
        new SignJWT({ tenant_ids: [tenantId] })
          .setProtectedHeader({ alg: "HS256" })
          .setSubject(subject)
          .setIssuedAt()
          .setExpirationTime("1h")
          .sign(new TextEncoder().encode(target.adminJwtSecret));
      const feed = "/api/v1/livechat/feed";
      const as = async (subject: string) => ({ authorization: `Bearer ${await token(subject)}`, "x-tenant-id": tenantId });
      const held: Held[] = [];
      for (let i = 0; i < PER_KEY; i++) held.push(await open(feed, await as("ann")));
      for (const stream of held) expect(stream.response.status).toBe(200);
      await refused("GET", feed, (await open(feed, await as("ann"))).response);
      const bob = await open(feed, await as("bob"));
      expect(bob.response.status).toBe(200);
      held[1]?.leave();
      const again = await openOnceFreed(feed, await as("ann"));
      expect(again.response.status).toBe(200);
      for (const stream of [...held, bob, again]) stream.leave();
    });
  });
}

capTests("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => capTests("Postgres", () => postgresTestStore(serverUrl)));

/** A raw connection, once the server accepted it (or closed it at once). */
function connection(port: number): Promise<{ socket: Socket; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => resolve({ socket, closed }));
    const closed = new Promise<void>((done) => socket.once("close", () => done()));
    socket.once("error", () => undefined);
    socket.once("error", reject);
  });
}

describe("serve's connection cap", () => {
  it("closes a connection past maxConnections at once, and accepts one again after another closed", async () => {
    const handler = { handler: async () => new Response("ok"), dispatch: undefined, routes: [], admin: {}, close: async () => undefined };
    const running = await serve(handler as never, { port: 0, maxConnections: 2 });
    try {
      const first = await connection(running.port);
      const second = await connection(running.port);
      // Accepted by the kernel, then closed by the server without an answer.
      const third = await connection(running.port);
      await third.closed;
      first.socket.destroy();
      await first.closed;
      await new Promise((resolve) => setTimeout(resolve, 50));
      const answer = await fetch(running.url, { headers: { connection: "close" } });
      expect(answer.status).toBe(200);
      expect(await answer.text()).toBe("ok");
      second.socket.destroy();
    } finally {
      await running.close();
    }
  });

  it("has a cap by default, and none with false", async () => {
    const handler = { handler: async () => new Response("ok"), routes: [], admin: {}, close: async () => undefined };
    const capped = await serve(handler as never, { port: 0 });
    const uncapped = await serve(handler as never, { port: 0, maxConnections: false });
    try {
      expect(capped.server.maxConnections).toBeGreaterThanOrEqual(16);
      expect(capped.server.maxConnections).toBeLessThanOrEqual(10_000);
      expect(Number.isFinite(uncapped.server.maxConnections)).toBe(false);
    } finally {
      await Promise.all([capped.close(), uncapped.close()]);
    }
  });
});
