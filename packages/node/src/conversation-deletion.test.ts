/**
 * Deleting a conversation, erasing an end user and listing conversations as an admin (issue
 * 45), on real SQLite and Postgres, over a real HTTP server: after each deletion, every table
 * of the database (read from its catalogue, not from a list kept here) is read row by row, and
 * none may hold the conversation's id, the end user's id or a word of their messages, except
 * the audit trail, which records the deletion by ids and hashes only.
 */
import { adminApi, type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import type { KyselyStorage } from "@channelkit/kysely";
import { describeWithPostgres, type FilledConversation, fillConversation, postgresTestStore, sqliteTestStore, type TestStore } from "@channelkit/testkit";
import { SignJWT } from "jose";
import { type Kysely, SqliteAdapter, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

const MASTER_KEY = "6f".repeat(32);
const JWT_SECRET = "conversation-deletion-test-admin-secret-0123";
const PLUGIN = "chat";

/** The tables of the database, from its own catalogue. */
async function tablesOf(db: Kysely<unknown>): Promise<string[]> {
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  const query = sqlite
    ? sql<{ name: string }>`select name from sqlite_master where type = 'table' and name not like 'sqlite_%' order by name`
    : sql<{
        name: string;
      }>`select table_name as name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name`;
  return (await query.execute(db)).rows.map((row) => row.name);
}

/** For each table, how many of its rows hold `text` in any column. */
async function rowsHolding(db: Kysely<unknown>, texts: string[]): Promise<Record<string, number>> {
  const found: Record<string, number> = {};
  for (const table of await tablesOf(db)) {
    const rows = (await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(db)).rows;
    const holding = rows.filter((row) => {
      const text = JSON.stringify(Object.values(row).map((value) => (typeof value === "bigint" ? String(value) : value)));
      return texts.some((needle) => text.includes(needle));
    }).length;
    if (holding > 0) found[table] = holding;
  }
  return found;
}

function deletionTests(name: string, open: () => Promise<TestStore>) {
  describe(`deleting conversations and erasing end users: ${name}`, () => {
    let store: TestStore;
    let db: Kysely<unknown>;
    let service: ChannelService;
    let server: RunningServer;
    let tenantId: string;
    let otherTenantId: string;
    let channel: { id: string; tenantId: string };
    let apiKey: string;

    beforeAll(async () => {
      store = await open();
      db = (store.storage as KyselyStorage).db as unknown as Kysely<unknown>;
      service = await createChannelService({
        storage: store.storage,
        flows: demoFlows,
        secretKey: MASTER_KEY,
        logger: { warn() {}, error() {} },
        plugins: [adminApi({ secret: JWT_SECRET })],
      });
      server = await serve(service, { port: 0 });
      tenantId = (await service.admin.createTenant({ name: "Acme" })).tenant.id;
      otherTenantId = (await service.admin.createTenant({ name: "Other" })).tenant.id;
      const created = await service.admin.createChannel({
        tenantId,
        flow: "echo",
        resumableStreams: true,
        livechatMessages: { livechat_active: "An agent is here" },
      });
      channel = { id: created.channel.id, tenantId };
      apiKey = created.api_key;
    });

    afterAll(async () => {
      await server?.close();
      await service?.close();
      await store?.dispose();
    });

    const token = (tenant = tenantId, subject = "alice") =>
      new SignJWT({ tenant_ids: [tenant] })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject(subject)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode(JWT_SECRET));

    const admin = async (method: string, path: string, options: { body?: unknown; tenant?: string; jwt?: string | null } = {}) => {
      const tenant = options.tenant ?? tenantId;
      const headers: Record<string, string> = { "X-Tenant-ID": tenant };
      const jwt = options.jwt === undefined ? await token(tenant) : options.jwt;
      if (jwt !== null) headers.Authorization = `Bearer ${jwt}`;
      if (options.body !== undefined) headers["Content-Type"] = "application/json";
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers,
        ...(options.body === undefined ? {} : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    /** A conversation made through execute over HTTP, with an Idempotency-Key: what a real client leaves. */
    async function executed(payload: string): Promise<string> {
      const response = await fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
        body: JSON.stringify({ payload, stream: false }),
      });
      expect(response.status).toBe(200);
      return ((await response.json()) as { conversation_id: string }).conversation_id;
    }

    const audited = async (operation: string) => (await service.admin.audit({ tenantId, limit: 200 })).events.filter((event) => event.operation === operation);

    it("deletes a conversation through the admin route: no row of it is left in any table, another conversation of the channel is whole", async () => {
      const doomed = await fillConversation(store.storage, channel, { externalUserId: "tg-100", pluginId: PLUGIN });
      const kept = await fillConversation(store.storage, channel, { externalUserId: "tg-200", pluginId: PLUGIN });
      // The check is not vacuous: before, the conversation's rows are where they belong.
      const before = await rowsHolding(db, [doomed.id]);
      for (const table of ["conversations", "messages", "runs", "idempotency_keys", "plugin_kv"]) expect(before[table], table).toBeGreaterThan(0);
      expect((await rowsHolding(db, doomed.contents)).run_stream_chunks).toBe(1);

      const answer = await admin("DELETE", `/api/v1/conversations/${doomed.id.toUpperCase()}`);
      expect(answer).toEqual({ status: 200, body: { deleted: { conversation_id: doomed.id, messages: 5, runs: 2 } } });

      // Table by table: nothing names it or holds a word of it, but the audit trail's ids.
      const after = await rowsHolding(db, [doomed.id, ...doomed.contents, ...doomed.runIds]);
      expect(after).toEqual({ audit_events: 1 });
      expect(await rowsHolding(db, doomed.contents)).toEqual({});
      const keptRows = await rowsHolding(db, [kept.id]);
      expect(keptRows).toMatchObject({ conversations: 1, messages: 5, runs: 2, idempotency_keys: 1, plugin_kv: 1 });
      expect((await rowsHolding(db, kept.contents)).run_stream_chunks).toBe(1);
      expect((await store.storage.listRecentMessages(kept.id, 100)).length).toBe(5);

      const [event] = await audited("delete_conversation");
      expect(event).toMatchObject({
        tenant_id: tenantId,
        channel_id: channel.id,
        actor: "alice",
        via: "http",
        outcome: "success",
        changes: { conversation_id: { from: doomed.id, to: null }, messages: { from: 5, to: 0 }, runs: { from: 2, to: 0 } },
      });

      // Gone: a second delete is a 404, recorded as refused.
      expect(await admin("DELETE", `/api/v1/conversations/${doomed.id}`)).toMatchObject({ status: 404, body: { error: { code: "conversation_not_found" } } });
      expect((await audited("delete_conversation"))[0]).toMatchObject({
        outcome: "failure",
        error_code: "conversation_not_found",
        changes: { conversation_id: { from: doomed.id } },
      });
    });

    it("deletes a conversation made by execute over HTTP, its idempotency record with it", async () => {
      const id = await executed("hello from a real client");
      expect(await rowsHolding(db, [id])).toMatchObject({ conversations: 1, messages: 2, runs: 1, idempotency_keys: 1 });
      expect(await service.admin.deleteConversation({ conversationId: id })).toEqual({ deleted: { conversation_id: id, messages: 2, runs: 1 } });
      expect(await rowsHolding(db, [id, "hello from a real client"])).toEqual({ audit_events: 1 });
    });

    it("answers every bad input in the envelope: a bad id 422, unknown or another tenant's 404, a run in flight 409, no token 401", async () => {
      expect(await admin("DELETE", "/api/v1/conversations/not-a-uuid")).toMatchObject({ status: 422, body: { error: { code: "validation_error" } } });
      expect(await admin("DELETE", `/api/v1/conversations/${crypto.randomUUID()}`)).toMatchObject({
        status: 404,
        body: { error: { code: "conversation_not_found" } },
      });
      const mine = await fillConversation(store.storage, channel);
      expect(await admin("DELETE", `/api/v1/conversations/${mine.id}`, { tenant: otherTenantId })).toMatchObject({
        status: 404,
        body: { error: { code: "conversation_not_found" } },
      });
      expect(await admin("DELETE", `/api/v1/conversations/${mine.id}`, { jwt: null })).toMatchObject({
        status: 401,
        body: { error: { code: "unauthorized" } },
      });
      expect(await admin("DELETE", `/api/v1/conversations/${mine.id}`, { jwt: await token(otherTenantId) })).toMatchObject({
        status: 403,
        body: { error: { code: "forbidden" } },
      });
      expect((await store.storage.listRecentMessages(mine.id, 100)).length).toBe(5);

      // A run in flight: its turn held under a lease that has not lapsed.
      const runId = crypto.randomUUID();
      const busyId = crypto.randomUUID();
      const now = new Date().toISOString();
      await store.storage.beginRun({
        conversation: { id: busyId, tenantId, channelId: channel.id, isNew: true },
        run: {
          id: runId,
          conversationId: busyId,
          channelId: channel.id,
          tenantId,
          status: "running",
          flowName: "echo",
          flowVersion: null,
          result: null,
          error: null,
          executionOrder: [],
          startedAt: now,
          completedAt: now,
          durationMs: 0,
        },
        userMessage: {
          origin: "agent",
          role: "user",
          content: "still running",
          timestamp: now,
          tokenCount: 1,
          runId,
          stepId: null,
          nodeType: null,
          toolCalls: null,
          toolCallId: null,
          livechatMessageId: null,
          sender: null,
          metadata: null,
        },
        now,
        leaseUntil: new Date(Date.now() + 60_000).toISOString(),
      });
      expect(await admin("DELETE", `/api/v1/conversations/${busyId}`)).toMatchObject({ status: 409, body: { error: { code: "run_in_progress" } } });
      expect(await store.storage.findConversation(busyId)).not.toBeNull();
      expect((await audited("delete_conversation"))[0]).toMatchObject({ outcome: "failure", error_code: "run_in_progress", channel_id: channel.id });
    });

    it("refuses a conversation whose run is streaming right now, and deletes it once the run ended", async () => {
      const slow = await service.admin.createChannel({ tenantId, flow: "slow" });
      const controller = new AbortController();
      const response = await fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { Authorization: `Bearer ${slow.api_key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ payload: "take your time", stream: true }),
        signal: controller.signal,
      });
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      let text = "";
      while (!text.includes("text-delta")) text += new TextDecoder().decode((await reader.read()).value);
      const conversationId = /"conversation_id":"([0-9a-f-]{36})"/.exec(text)?.[1] as string;
      expect(await admin("DELETE", `/api/v1/conversations/${conversationId}`)).toMatchObject({ status: 409, body: { error: { code: "run_in_progress" } } });
      expect(await store.storage.findConversation(conversationId)).not.toBeNull();
      // The client goes away: the run is stored cancelled and lets its conversation go.
      controller.abort();
      await reader.cancel().catch(() => undefined);
      let answer = await admin("DELETE", `/api/v1/conversations/${conversationId}`);
      for (let i = 0; i < 100 && answer.status === 409; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        answer = await admin("DELETE", `/api/v1/conversations/${conversationId}`);
      }
      expect(answer).toMatchObject({ status: 200, body: { deleted: { conversation_id: conversationId, runs: 1 } } });
      expect(await rowsHolding(db, [conversationId, "take your time"])).toEqual({ audit_events: 2 });
    });

    it("erases an end user: every conversation they took part in, on every channel of the tenant, and nothing of theirs is left in any table", async () => {
      const user = `tg-${crypto.randomUUID()}`;
      const second = await service.admin.createChannel({ tenantId, flow: "echo" });
      const theirs: FilledConversation[] = [
        await fillConversation(store.storage, channel, { externalUserId: user, pluginId: PLUGIN }),
        await fillConversation(store.storage, { id: second.channel.id, tenantId }, { externalUserId: user, pluginId: PLUGIN }),
      ];
      const someoneElse = await fillConversation(store.storage, channel, { externalUserId: `tg-${crypto.randomUUID()}` });
      expect(await rowsHolding(db, [user])).toMatchObject({ messages: 4 });

      // The listing by end user shows theirs, newest first.
      const listed = await admin("GET", `/api/v1/conversations?external_user_id=${encodeURIComponent(user)}`);
      expect(listed.status).toBe(200);
      expect((listed.body.conversations as { conversation_id: string }[]).map((c) => c.conversation_id).sort()).toEqual(theirs.map((c) => c.id).sort());

      const answer = await admin("POST", "/api/v1/end-users/erase", { body: { external_user_id: user } });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ erased: { external_user_id: user, conversations: 2, messages: 10, runs: 4 } });
      expect(((answer.body.erased as { conversation_ids: string[] }).conversation_ids ?? []).sort()).toEqual(theirs.map((c) => c.id).sort());

      const texts = [user, ...theirs.flatMap((c) => [c.id, ...c.contents, ...c.runIds])];
      // The audit trail names the conversations by id, the user by a hash: never the user's id or a message.
      expect(await rowsHolding(db, texts)).toEqual({ audit_events: 1 });
      expect(await rowsHolding(db, [user, ...theirs.flatMap((c) => c.contents)])).toEqual({});
      expect(await rowsHolding(db, [someoneElse.id])).toMatchObject({ conversations: 1, messages: 5, runs: 2 });

      const [event] = await audited("erase_end_user");
      const hash = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(user))), (b) =>
        b.toString(16).padStart(2, "0"),
      ).join("");
      expect(event).toMatchObject({
        outcome: "success",
        tenant_id: tenantId,
        changes: { external_user_sha256: { from: hash, to: null }, messages: { from: 10, to: 0 } },
      });

      // Again: nothing left to erase, and it is recorded all the same.
      expect(await admin("POST", "/api/v1/end-users/erase", { body: { external_user_id: user } })).toMatchObject({
        status: 200,
        body: { erased: { conversations: 0 } },
      });
      // Bad bodies.
      expect(await admin("POST", "/api/v1/end-users/erase", { body: {} })).toMatchObject({ status: 422, body: { error: { code: "validation_error" } } });
      expect(await admin("POST", "/api/v1/end-users/erase", { body: { external_user_id: "" } })).toMatchObject({ status: 422 });
      expect(await admin("POST", "/api/v1/end-users/erase", { body: { external_user_id: "u", extra: 1 } })).toMatchObject({ status: 422 });
      expect(await admin("POST", "/api/v1/end-users/erase", { body: "{not json" })).toMatchObject({ status: 422 });
    });

    it("lists the tenant's conversations, newest first, by channel and period, a page at a time; bad parameters are 422", async () => {
      const own = await service.admin.createChannel({ tenantId, flow: "echo" });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await fillConversation(store.storage, { id: own.channel.id, tenantId }, { seconds: 1000 + i * 100 })).id);
      const first = await admin("GET", `/api/v1/conversations?channel_id=${own.channel.id}&limit=2`);
      expect(first.status).toBe(200);
      const page = first.body as { conversations: { conversation_id: string; mode: string; livechat_status_message: string | null }[]; next_cursor: string };
      expect(page.conversations.map((c) => c.conversation_id)).toEqual([ids[2], ids[1]]);
      expect(page.conversations[0]).toMatchObject({ channel_id: own.channel.id, mode: "livechat_active", livechat_status_message: null });
      const second = await admin("GET", `/api/v1/conversations?channel_id=${own.channel.id}&limit=2&cursor=${page.next_cursor}`);
      expect(second.body).toEqual({ conversations: [expect.objectContaining({ conversation_id: ids[0] })], next_cursor: null });
      const period = await admin("GET", `/api/v1/conversations?channel_id=${own.channel.id}&since=2025-01-01T00:18:00Z&until=2025-01-01T00:19:00%2B00:00`);
      expect((period.body.conversations as { conversation_id: string }[]).map((c) => c.conversation_id)).toEqual([ids[1]]);
      // Another tenant sees none of them.
      expect(await admin("GET", `/api/v1/conversations?channel_id=${own.channel.id}`, { tenant: otherTenantId })).toEqual({
        status: 200,
        body: { conversations: [], next_cursor: null },
      });
      for (const query of ["limit=0", "limit=x", "channel_id=nope", "since=yesterday", "cursor=bad", "unknown=1", "external_user_id="]) {
        expect(await admin("GET", `/api/v1/conversations?${query}`), query).toMatchObject({ status: 422, body: { error: { code: "validation_error" } } });
      }
    });
  });
}

deletionTests("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => deletionTests("Postgres", () => postgresTestStore(serverUrl)));
