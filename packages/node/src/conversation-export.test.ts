/**
 * Exporting conversations as JSON Lines (issue 45), on real SQLite and Postgres, over a real
 * HTTP server: by channel and period, by conversation, confined to the tenant, a large export
 * read line by line as it streams, bad queries refused with 422, recorded in the audit trail
 * without a message.
 */
import { adminApi, type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres, type FilledConversation, fillConversation, postgresTestStore, sqliteTestStore, type TestStore } from "@channelkit/testkit";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

const MASTER_KEY = "6e".repeat(32);
const JWT_SECRET = "conversation-export-test-admin-secret-0123";

interface ExportLine {
  conversation: { conversation_id: string; channel_id: string; created_at: string; mode: string };
  messages: { content: string; turn_index: number; role: string; origin: string }[];
}

function exportTests(name: string, open: () => Promise<TestStore>) {
  describe(`exporting conversations: ${name}`, () => {
    let store: TestStore;
    let service: ChannelService;
    let server: RunningServer;
    let tenantId: string;
    let otherTenantId: string;

    beforeAll(async () => {
      store = await open();
      service = await createChannelService({
        storage: store.storage,
        flows: demoFlows,
        secretKey: MASTER_KEY,
        logger: { warn() {}, error() {} },
        plugins: [adminApi({ secret: JWT_SECRET })],
      });
      server = await serve(service, { port: 0, host: "127.0.0.1" });
      tenantId = (await service.admin.createTenant({ name: "Acme" })).tenant.id;
      otherTenantId = (await service.admin.createTenant({ name: "Other" })).tenant.id;
    });

    afterAll(async () => {
      await server?.close();
      await service?.close();
      await store?.dispose();
    });

    const token = (tenant: string) =>
      new SignJWT({ tenant_ids: [tenant] })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject("alice")
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode(JWT_SECRET));

    const exportRequest = async (query: string, tenant = tenantId) =>
      fetch(`${server.url}/api/v1/export/conversations${query === "" ? "" : `?${query}`}`, {
        headers: { "X-Tenant-ID": tenant, Authorization: `Bearer ${await token(tenant)}` },
      });

    /** The export's lines, each parsed; the body must end with a newline when it has any line. */
    const exported = async (query: string, tenant = tenantId): Promise<ExportLine[]> => {
      const response = await exportRequest(query, tenant);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
      const text = await response.text();
      if (text === "") return [];
      expect(text.endsWith("\n")).toBe(true);
      return text
        .slice(0, -1)
        .split("\n")
        .map((line) => JSON.parse(line) as ExportLine);
    };

    const expectWhole = (line: ExportLine | undefined, filled: FilledConversation) => {
      expect(line?.conversation.conversation_id).toBe(filled.id);
      const messages = line?.messages ?? [];
      expect(messages.length).toBe(filled.messages);
      expect(messages.map((message) => message.turn_index)).toEqual(messages.map((_, i) => i));
      expect([...messages.map((message) => message.content)].sort()).toEqual([...filled.contents].sort());
    };

    it("exports a channel's conversations of a period, each with its messages in order, and one conversation by its id", async () => {
      const channel = { id: (await service.admin.createChannel({ tenantId, flow: "echo" })).channel.id, tenantId };
      const other = { id: (await service.admin.createChannel({ tenantId, flow: "echo" })).channel.id, tenantId };
      // January's first hour and its second.
      const early = [];
      const late = [];
      for (let i = 0; i < 3; i++) early.push(await fillConversation(store.storage, channel, { seconds: 100 + i * 100, externalUserId: `user-${i}` }));
      for (let i = 0; i < 2; i++) late.push(await fillConversation(store.storage, channel, { seconds: 4000 + i * 100 }));
      const elsewhere = await fillConversation(store.storage, other, { seconds: 200 });

      const firstHour = await exported(`channel_id=${channel.id}&since=2025-01-01T00:00:00Z&until=2025-01-01T01:00:00%2B00:00`);
      expect(firstHour.map((line) => line.conversation.conversation_id)).toEqual([early[2]?.id, early[1]?.id, early[0]?.id]);
      for (const [i, filled] of early.entries()) expectWhole(firstHour[2 - i], filled);
      expect(firstHour[0]?.conversation).toMatchObject({ channel_id: channel.id, mode: "livechat_active" });

      const secondHour = await exported(`channel_id=${channel.id}&since=2025-01-01T01:00:00Z`);
      expect(secondHour.map((line) => line.conversation.conversation_id)).toEqual([late[1]?.id, late[0]?.id]);
      expect((await exported(`channel_id=${channel.id}`)).length).toBe(5);

      // One conversation; of another channel than named: none.
      const one = await exported(`conversation_id=${early[1]?.id.toUpperCase()}`);
      expect(one.length).toBe(1);
      expectWhole(one[0], early[1] as FilledConversation);
      expect(await exported(`conversation_id=${elsewhere.id}&channel_id=${channel.id}`)).toEqual([]);
      // An end user's.
      expect((await exported(`external_user_id=user-2`)).map((line) => line.conversation.conversation_id)).toEqual([early[2]?.id]);
      // None matching: 200, empty body.
      expect(await exported(`channel_id=${channel.id}&since=2026-01-01T00:00:00Z`)).toEqual([]);

      // The same through service.admin.
      const lines = [];
      for await (const line of await service.admin.exportConversations({ channelId: other.id })) lines.push(line);
      expect(lines.map((line) => line.conversation.conversation_id)).toEqual([elsewhere.id]);

      // Recorded, with the filters and never a message.
      const events = (await service.admin.audit({ tenantId, limit: 200 })).events.filter((event) => event.operation === "export_conversations");
      expect(events.length).toBeGreaterThanOrEqual(8);
      expect(events.find((event) => (event.changes as Record<string, { to: unknown }>).channel_id?.to === channel.id)).toBeDefined();
      const trail = JSON.stringify(events);
      for (const filled of [...early, ...late]) for (const content of filled.contents) expect(trail).not.toContain(content);
      expect(trail).not.toContain("user-2");
    });

    it("never exports another tenant's conversations: its conversation is not found, its channel exports nothing", async () => {
      const theirs = { id: (await service.admin.createChannel({ tenantId: otherTenantId, flow: "echo" })).channel.id, tenantId: otherTenantId };
      const filled = await fillConversation(store.storage, theirs, { seconds: 50 });
      const response = await exportRequest(`conversation_id=${filled.id}`);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: "conversation_not_found" } });
      expect(await exported(`channel_id=${theirs.id}`)).toEqual([]);
      const all = await exported("");
      expect(all.some((line) => line.conversation.conversation_id === filled.id)).toBe(false);
      // Their own admin exports it.
      expect((await exported(`conversation_id=${filled.id}`, otherTenantId)).length).toBe(1);
    });

    it("streams a large export: 300 conversations, read as they come, every line whole", async () => {
      const channel = { id: (await service.admin.createChannel({ tenantId, flow: "echo" })).channel.id, tenantId };
      const ids = new Set<string>();
      for (let i = 0; i < 300; i++) ids.add((await fillConversation(store.storage, channel, { seconds: 10_000 + i })).id);
      const response = await exportRequest(`channel_id=${channel.id}`);
      expect(response.status).toBe(200);
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      let chunks = 0;
      let linesBeforeEnd = 0;
      const seen: string[] = [];
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks++;
        buffered += decoder.decode(value, { stream: true });
        const lines = buffered.split("\n");
        buffered = lines.pop() ?? "";
        for (const line of lines) seen.push((JSON.parse(line) as ExportLine).conversation.conversation_id);
        if (seen.length < 300) linesBeforeEnd = seen.length;
      }
      expect(buffered).toBe("");
      expect(chunks).toBeGreaterThan(1);
      expect(linesBeforeEnd).toBeGreaterThan(0);
      expect(seen.length).toBe(300);
      expect(new Set(seen)).toEqual(ids);
    }, 120_000);

    it("refuses bad queries with 422 in the envelope", async () => {
      for (const query of [
        "channel_id=nope",
        "conversation_id=123",
        "since=yesterday",
        "until=2025-13-01T00:00:00Z",
        "since=2025-02-01T00:00:00Z&until=2025-01-01T00:00:00Z",
        "external_user_id=",
        "unknown=1",
      ]) {
        const response = await exportRequest(query);
        expect(response.status, query).toBe(422);
        expect(await response.json(), query).toMatchObject({ error: { code: "validation_error" } });
      }
      const anonymous = await fetch(`${server.url}/api/v1/export/conversations`, { headers: { "X-Tenant-ID": tenantId } });
      expect(anonymous.status).toBe(401);
    });
  });
}

exportTests("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => exportTests("Postgres", () => postgresTestStore(serverUrl)));
