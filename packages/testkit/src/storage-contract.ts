import type {
  ApiKeyRecord,
  AuditEventRecord,
  BeginRunInput,
  ChannelRecord,
  ClaimedTurn,
  ClaimTurnInput,
  CompleteRunInput,
  ConversationMode,
  ConversationQuery,
  DeleteConversationsInput,
  DeletedConversation,
  EndUserQuery,
  IdempotencyClaim,
  IdempotencyStore,
  IdempotentResponse,
  ModeChange,
  NewMessage,
  PluginStore,
  RunRecord,
  RunStatus,
  RunTicket,
  Storage,
} from "@channelkit/core";
import { TurnPassedOver } from "@channelkit/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FilledConversation, fillConversation } from "./conversation-rows.js";

/**
 * A storage for {@link storageContract}: the storage alone, or with what removes what it
 * left behind (a temporary file, a test database), as the stores of `@channelkit/testkit` are.
 */
export type StorageUnderTest = Storage | { storage: Storage; dispose(): Promise<void> };

const T0 = Date.parse("2025-01-01T00:00:00.000Z");
/** ISO 8601 time `seconds` after the suite's fixed epoch. */
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();
const LEASE_SECONDS = 30;

/**
 * Declares the behaviour every {@link Storage} must have (vitest `describe`/`it`), whatever
 * its database: tenants, channels and keys read back as written; and above all the run
 * queue: runs of one conversation take turns by ticket, a lapsed lease is taken over, a run
 * cancelled while it waited is skipped, and turn indexes stay contiguous under concurrency.
 * `open` is called once for the whole suite and must give a fresh, migrated storage; every
 * test provisions its own tenants and channels.
 *
 * @example
 * storageContract("memory", async () => memoryStorage());
 * storageContract("SQLite", sqliteTestStore);
 */
export function storageContract(name: string, open: () => Promise<StorageUnderTest>): void {
  describe(`Storage contract: ${name}`, () => {
    let opened: StorageUnderTest | undefined;
    let storage: Storage;
    beforeAll(async () => {
      opened = await open();
      storage = "dispose" in opened ? opened.storage : opened;
      await storage.migrate();
    });
    afterAll(async () => {
      if (!opened) return;
      await storage.close();
      if ("dispose" in opened) await opened.dispose();
    });

    async function seed(overrides: Partial<ChannelRecord> = {}) {
      const tenant = { id: crypto.randomUUID(), name: "Acme", createdAt: at(0) };
      await storage.createTenant(tenant);
      const channel = channelRecord(tenant.id, overrides);
      const key = keyRecord(channel, `hash-${crypto.randomUUID()}`);
      await storage.createChannel(channel, key);
      return { tenant, channel, key };
    }

    /** A conversation of a seeded channel, and runs on it. */
    async function conversation() {
      const { channel } = await seed();
      return new Conversation(storage, channel);
    }

    let rowAtClaim: Promise<boolean> | undefined;
    /**
     * Whether the store writes the row of a run that is not recorded with its claim (Postgres,
     * where the claim is one statement) or with its outcome (SQLite, memory): both are allowed
     * ({@link Storage.findRun}).
     */
    function writesRunAtClaim(): Promise<boolean> {
      rowAtClaim ??= (async () => {
        const run = (await conversation()).run("probe");
        await ticketOf(storage, run.begin(0));
        return (await storage.findRun(run.id)) !== null;
      })();
      return rowAtClaim;
    }

    /** A claimed run that is not recorded, in flight: its `running` row (`expected`), or none yet where the store writes it with its outcome. */
    async function expectInFlight(id: string, expected: Partial<RunRecord> = { status: "running" }): Promise<void> {
      const stored = await storage.findRun(id);
      if (await writesRunAtClaim()) expect(stored).toMatchObject(expected);
      else expect(stored).toBeNull();
    }

    describe("tenants and channels", () => {
      it("stores and reads back a tenant; a duplicate id fails", async () => {
        const before = await storage.countTenants();
        const tenant = { id: crypto.randomUUID(), name: "Acme", createdAt: at(0) };
        await storage.createTenant(tenant);
        expect(await storage.countTenants()).toBe(before + 1);
        expect(await storage.findTenant(tenant.id)).toEqual(tenant);
        expect(await storage.findTenant(crypto.randomUUID())).toBeNull();
        await expect(storage.createTenant({ ...tenant, name: "Other" })).rejects.toThrow();
        expect(await storage.findTenant(tenant.id)).toEqual(tenant);
        expect(await storage.countTenants()).toBe(before + 1);
      });

      it("stores and reads back a channel with its JSON and boolean fields", async () => {
        const { channel } = await seed({
          clientId: `client-${crypto.randomUUID()}`,
          requireSignature: true,
          defaultStream: false,
          signingSecretEncrypted: "v1:a:b",
        });
        expect(await storage.findChannel(channel.id)).toEqual(channel);
        expect(await storage.findChannel(crypto.randomUUID())).toBeNull();
        const plain = await seed({ name: null, allowedOrigins: [], languages: [], livechatMessages: {}, apiKeyHint: null });
        expect(await storage.findChannel(plain.channel.id)).toEqual(plain.channel);
      });

      it("stores and reads back a channel of a plugin's type with its settings and sealed settings; a patch replaces them", async () => {
        const settings = { greeting: "Hi 👋", retries: 3, enabled: true, nested: { list: [1, "two", null] } };
        const { channel, key } = await seed({ type: "telegram", settings, sealedSettings: "v1:iv:sealed-secrets" });
        expect(await storage.findChannel(channel.id)).toEqual(channel);
        expect(await storage.findKeyByHash(key.hash)).toEqual({ key, channel });
        expect(await storage.listChannels({ tenantId: channel.tenantId })).toEqual([channel]);
        const updated = await storage.updateChannel(channel.id, { settings: { greeting: "Hello" }, sealedSettings: "v1:iv:rotated" }, at(100));
        const expected = { ...channel, settings: { greeting: "Hello" }, sealedSettings: "v1:iv:rotated", updatedAt: at(100) };
        expect(updated).toEqual(expected);
        expect(await storage.findChannel(channel.id)).toEqual(expected);
        // A patch without them leaves them; null removes the sealed settings.
        expect(await storage.updateChannel(channel.id, { name: "renamed" }, at(101))).toEqual({ ...expected, name: "renamed", updatedAt: at(101) });
        expect(await storage.updateChannel(channel.id, { sealedSettings: null }, at(102))).toMatchObject({
          settings: { greeting: "Hello" },
          sealedSettings: null,
        });
      });

      it("applies a patch that expects the settings it merged into only while the channel still has them", async () => {
        const { channel } = await seed({ type: "telegram", settings: { greeting: "Hi" }, sealedSettings: "v1:iv:first" });
        const read = { settings: { greeting: "Hi" }, sealedSettings: "v1:iv:first" };
        const first = await storage.updateChannel(channel.id, { settings: { greeting: "Hey" } }, at(300), undefined, read);
        expect(first).toMatchObject({ settings: { greeting: "Hey" }, sealedSettings: "v1:iv:first" });
        // A second writer that merged into the same settings changes nothing.
        expect(await storage.updateChannel(channel.id, { settings: { greeting: "Yo" } }, at(301), undefined, read)).toBeNull();
        expect(
          await storage.updateChannel(channel.id, { sealedSettings: "v1:iv:other" }, at(301), undefined, {
            settings: { greeting: "Hey" },
            sealedSettings: "v1:iv:stale",
          }),
        ).toBeNull();
        expect(await storage.findChannel(channel.id)).toMatchObject({ settings: { greeting: "Hey" }, sealedSettings: "v1:iv:first", updatedAt: at(300) });
        // The settings as they are now let the write through; no sealed settings are expected as null.
        const rotated = await storage.updateChannel(channel.id, { sealedSettings: null }, at(302), undefined, {
          settings: { greeting: "Hey" },
          sealedSettings: "v1:iv:first",
        });
        expect(rotated).toMatchObject({ sealedSettings: null });
        expect(
          await storage.updateChannel(channel.id, { sealedSettings: "v1:iv:new" }, at(303), undefined, { settings: { greeting: "Hey" }, sealedSettings: null }),
        ).toMatchObject({
          sealedSettings: "v1:iv:new",
        });
      });

      it("creates a channel and its key atomically: a duplicate key hash fails and leaves no channel", async () => {
        const { tenant, key } = await seed();
        const second = channelRecord(tenant.id);
        await expect(storage.createChannel(second, keyRecord(second, key.hash))).rejects.toThrow();
        expect(await storage.findChannel(second.id)).toBeNull();
        // The channel id is free: the same channel with another key is stored.
        const fresh = keyRecord(second, `hash-${crypto.randomUUID()}`);
        await storage.createChannel(second, fresh);
        expect(await storage.findKeyByHash(fresh.hash)).toEqual({ key: fresh, channel: second });
      });

      it("refuses a second channel with the same id", async () => {
        const { tenant, channel } = await seed();
        const again = { ...channelRecord(tenant.id), id: channel.id, name: "again" };
        await expect(storage.createChannel(again, keyRecord(again, `hash-${crypto.randomUUID()}`))).rejects.toThrow();
        expect(await storage.findChannel(channel.id)).toEqual(channel);
      });

      it("updates only the patched fields and returns the new record; an unknown channel gives null", async () => {
        const { channel } = await seed();
        const updated = await storage.updateChannel(
          channel.id,
          { state: "inactive", allowedOrigins: [], defaultStream: false, requireSignature: true, name: null, languages: ["de_DE"] },
          at(100),
        );
        const expected = {
          ...channel,
          state: "inactive",
          allowedOrigins: [],
          defaultStream: false,
          requireSignature: true,
          name: null,
          languages: ["de_DE"],
          updatedAt: at(100),
        };
        expect(updated).toEqual(expected);
        expect(await storage.findChannel(channel.id)).toEqual(expected);
        // A field given as undefined is left alone.
        const again = await storage.updateChannel(channel.id, { flowName: "other", state: undefined, livechatMessages: { livechat_closed: "Bye" } }, at(200));
        expect(again).toEqual({ ...expected, flowName: "other", livechatMessages: { livechat_closed: "Bye" }, updatedAt: at(200) });
        expect(await storage.updateChannel(crypto.randomUUID(), { state: "active" }, at(0))).toBeNull();
      });

      it("applies a patch that expects signature settings only while the channel still has them", async () => {
        const { channel } = await seed();
        expect(channel).toMatchObject({ requireSignature: false, signingSecretEncrypted: null });
        const turnOn = { requireSignature: true, signingSecretEncrypted: "sealed-first" };
        const expected = { requireSignature: false, signingSecretEncrypted: null };
        const first = await storage.updateChannel(channel.id, turnOn, at(300), undefined, expected);
        expect(first).toMatchObject({ requireSignature: true, signingSecretEncrypted: "sealed-first" });
        // A second writer that read the same settings changes nothing.
        expect(await storage.updateChannel(channel.id, { ...turnOn, signingSecretEncrypted: "sealed-second" }, at(301), undefined, expected)).toBeNull();
        expect(await storage.findChannel(channel.id)).toMatchObject({ signingSecretEncrypted: "sealed-first", updatedAt: at(300) });
        // The settings as they are now, a secret included, let the write through.
        const off = await storage.updateChannel(channel.id, { requireSignature: false }, at(302), undefined, {
          requireSignature: true,
          signingSecretEncrypted: "sealed-first",
        });
        expect(off).toMatchObject({ requireSignature: false, signingSecretEncrypted: "sealed-first" });
        expect(
          await storage.updateChannel(channel.id, { requireSignature: true }, at(303), undefined, {
            requireSignature: false,
            signingSecretEncrypted: "sealed-other",
          }),
        ).toBeNull();
        expect(
          await storage.updateChannel(channel.id, { requireSignature: true }, at(304), undefined, {
            requireSignature: false,
            signingSecretEncrypted: "sealed-first",
          }),
        ).toMatchObject({
          requireSignature: true,
        });
      });

      it("finds a webhook channel by its client id, and nothing for an unknown one", async () => {
        const clientId = `client-${crypto.randomUUID()}`;
        const { channel } = await seed({ type: "webhook", clientId, languages: ["en_US", "fr_FR"] });
        expect(await storage.findChannelByClientId(clientId)).toEqual(channel);
        expect(await storage.findChannelByClientId(`unknown-${crypto.randomUUID()}`)).toBeNull();
      });

      it("returns copies: changing a record read or written does not change what is stored", async () => {
        const { channel, key } = await seed();
        const expected = structuredClone(channel);
        channel.allowedOrigins.push("https://changed.example.com");
        channel.livechatMessages.livechat_active = "changed";
        channel.settings.changed = true;
        const read = await storage.findChannel(channel.id);
        expect(read).toEqual(expected);
        read?.languages.push("xx_XX");
        const found = await storage.findKeyByHash(key.hash);
        // The request path's key and channel may be frozen records shared by requests (Storage.findKeyByHash).
        changeUnlessFrozen(() => found?.channel.allowedOrigins.push("https://other.example.com"));
        changeUnlessFrozen(() => {
          if (found) found.key.hint = "changed";
        });
        expect(await storage.findChannel(channel.id)).toEqual(expected);
        expect((await storage.findKeyByHash(key.hash))?.key.hint).toBe(key.hint);
      });
    });

    describe("keys", () => {
      it("findKeyByHash returns the key with its channel, or null", async () => {
        const { channel, key } = await seed();
        expect(await storage.findKeyByHash(key.hash)).toEqual({ key, channel });
        expect(await storage.findKeyByHash(`unknown-${crypto.randomUUID()}`)).toBeNull();
      });

      it("replaceChannelKey revokes every active key, stores the new one and updates the channel's hint", async () => {
        const { channel, key } = await seed();
        const other = await seed();

        const second = keyRecord(channel, `hash-${crypto.randomUUID()}`, "svc_live_****cond");
        await storage.replaceChannelKey(channel.id, second, at(300));
        expect((await storage.findKeyByHash(key.hash))?.key.revokedAt).toBe(at(300));
        const found = await storage.findKeyByHash(second.hash);
        expect(found?.key).toEqual(second);
        expect(found?.channel).toEqual({ ...channel, apiKeyHint: "svc_live_****cond", updatedAt: at(300) });

        const third = keyRecord(channel, `hash-${crypto.randomUUID()}`, "svc_live_****hird");
        await storage.replaceChannelKey(channel.id, third, at(400));
        // A key already revoked keeps its revocation time.
        expect((await storage.findKeyByHash(key.hash))?.key.revokedAt).toBe(at(300));
        expect((await storage.findKeyByHash(second.hash))?.key.revokedAt).toBe(at(400));
        expect((await storage.findKeyByHash(third.hash))?.key.revokedAt).toBeNull();
        expect((await storage.findChannel(channel.id))?.apiKeyHint).toBe("svc_live_****hird");

        // Another channel's key is untouched.
        expect(await storage.findKeyByHash(other.key.hash)).toEqual({ key: other.key, channel: other.channel });
      });

      it("replaceChannelKey is one transaction: a duplicate hash revokes nothing", async () => {
        const { channel, key } = await seed();
        const other = await seed();
        await expect(storage.replaceChannelKey(channel.id, keyRecord(channel, other.key.hash), at(500))).rejects.toThrow();
        expect(await storage.findKeyByHash(key.hash)).toEqual({ key, channel });
      });
    });

    describe("the audit trail", () => {
      /** An event of `tenantId` at second `second` of the suite's clock. */
      function auditEvent(tenantId: string | null, channelId: string | null, second: number, overrides: Partial<AuditEventRecord> = {}): AuditEventRecord {
        return {
          id: crypto.randomUUID(),
          timestamp: at(second),
          tenantId,
          channelId,
          actor: "alice",
          via: "http",
          operation: "update_channel",
          changes: { allowed_origins: { from: [], to: ["https://a.example"] } },
          outcome: "success",
          errorCode: null,
          ...overrides,
        };
      }

      it("a write and its event are one transaction: both stored, or neither", async () => {
        const tenant = { id: crypto.randomUUID(), name: "Audited", createdAt: at(0) };
        const created = auditEvent(tenant.id, null, 1, { operation: "create_tenant", changes: { name: { from: null, to: "Audited" } } });
        await storage.createTenant(tenant, created);
        const channel = channelRecord(tenant.id);
        const key = keyRecord(channel, `hash-${crypto.randomUUID()}`);
        await storage.createChannel(channel, key, auditEvent(tenant.id, channel.id, 2, { operation: "create_channel" }));
        const updated = auditEvent(tenant.id, channel.id, 3);
        expect(await storage.updateChannel(channel.id, { allowedOrigins: ["https://a.example"] }, at(3), updated)).not.toBeNull();
        const rotated = auditEvent(tenant.id, channel.id, 4, { operation: "rotate_key", changes: {} });
        expect(await storage.replaceChannelKey(channel.id, keyRecord(channel, `hash-${crypto.randomUUID()}`), at(4), rotated)).toBe(true);
        const events = await storage.listAuditEvents({ tenantId: tenant.id, limit: 10 });
        expect(events.map((event) => event.operation)).toEqual(["rotate_key", "update_channel", "create_channel", "create_tenant"]);
        expect(events[1]).toEqual(updated);
        expect(events[3]).toEqual(created);

        // A failed write leaves no event: a duplicate channel id, a duplicate key hash.
        const failing = auditEvent(tenant.id, channel.id, 5, { operation: "create_channel" });
        await expect(storage.createChannel(channel, keyRecord(channel, `hash-${crypto.randomUUID()}`), failing)).rejects.toThrow();
        await expect(storage.replaceChannelKey(channel.id, keyRecord(channel, key.hash), at(5), auditEvent(tenant.id, channel.id, 5))).rejects.toThrow();
        expect(await storage.listAuditEvents({ tenantId: tenant.id, limit: 10 })).toHaveLength(4);
      });

      it("an archived channel takes no update and no key, and records no event: archived is final", async () => {
        const { tenant, channel, key } = await seed();
        const archived = await storage.updateChannel(channel.id, { state: "archived" }, at(10));
        expect(archived?.state).toBe("archived");
        expect(await storage.updateChannel(channel.id, { state: "active" }, at(11), auditEvent(tenant.id, channel.id, 11))).toBeNull();
        expect(
          await storage.replaceChannelKey(channel.id, keyRecord(channel, `hash-${crypto.randomUUID()}`), at(12), auditEvent(tenant.id, channel.id, 12)),
        ).toBe(false);
        expect(await storage.findChannel(channel.id)).toEqual({ ...channel, state: "archived", updatedAt: at(10) });
        expect((await storage.findKeyByHash(key.hash))?.key.revokedAt).toBeNull();
        expect(await storage.listAuditEvents({ tenantId: tenant.id, limit: 10 })).toEqual([]);
        expect(await storage.replaceChannelKey(crypto.randomUUID(), keyRecord(channel, `hash-${crypto.randomUUID()}`), at(13))).toBe(false);
      });

      it("lists newest first by timestamp then id, by tenant and channel, a page at a time from a keyset", async () => {
        const tenantId = crypto.randomUUID();
        const channelId = crypto.randomUUID();
        const ids = Array.from({ length: 3 }, () => crypto.randomUUID()).sort();
        // Three events in one millisecond (ordered by id), one earlier, one of another channel, one of another tenant.
        const same = ids.map((id) => auditEvent(tenantId, channelId, 20, { id }));
        const earlier = auditEvent(tenantId, channelId, 19, { outcome: "failure", errorCode: "channel_archived", changes: {} });
        const otherChannel = auditEvent(tenantId, crypto.randomUUID(), 21, { actor: null, via: "service" });
        const otherTenant = auditEvent(crypto.randomUUID(), channelId, 22);
        for (const event of [...same, earlier, otherChannel, otherTenant]) await storage.appendAuditEvent(event);

        const newestFirst = [same[2], same[1], same[0], earlier];
        expect(await storage.listAuditEvents({ tenantId, channelId, limit: 10 })).toEqual(newestFirst);
        expect(await storage.listAuditEvents({ tenantId, limit: 10 })).toEqual([otherChannel, ...newestFirst]);
        expect((await storage.listAuditEvents({ channelId, limit: 10 }))[0]).toEqual(otherTenant);
        const first = await storage.listAuditEvents({ tenantId, channelId, limit: 2 });
        expect(first).toEqual(newestFirst.slice(0, 2));
        const last = first[1] as AuditEventRecord;
        expect(await storage.listAuditEvents({ tenantId, channelId, limit: 2, before: { timestamp: last.timestamp, id: last.id } })).toEqual(
          newestFirst.slice(2),
        );
        await expect(storage.appendAuditEvent(earlier)).rejects.toThrow();
      });
    });

    describe("a run starting a conversation", () => {
      it("creates it, holds ticket 0 and its turn at once, and stores its user message at turn 0 and its running row", async () => {
        const c = await conversation();
        const run = c.run("hello");
        const ticket = await ticketOf(storage, run.begin(0));
        expect(ticket.ticket).toBe(0);
        expect(ticket.claimed).toEqual({
          conversation: {
            id: c.id,
            tenantId: c.channel.tenantId,
            channelId: c.channel.id,
            mode: "bot",
            modeSince: at(0),
            flowState: undefined,
            nextTurn: 1,
            livechatConversationId: null,
            language: null,
            createdAt: at(0),
            updatedAt: at(0),
          },
          userMessage: { ...run.userMessage, conversationId: c.id, turnIndex: 0 },
        });
        expect(await storage.findConversation(c.id)).toEqual(ticket.claimed?.conversation);
        expect(await storage.listRecentMessages(c.id, 10)).toEqual([ticket.claimed?.userMessage]);
        await expectInFlight(run.id, { ...run.record, status: "running", completedAt: run.record.startedAt, durationMs: 0 });

        await storage.completeRun(run.complete({ ticket: 0, messages: ["Echo: hello"], flowState: { n: 1 }, seconds: 2 }));
        expect(await storage.findRun(run.id)).toEqual({
          ...run.record,
          status: "success",
          result: { ok: true },
          executionOrder: ["echo"],
          completedAt: at(2),
          durationMs: 2000,
        });
        expect(await storage.findConversation(c.id)).toEqual({ ...ticket.claimed?.conversation, flowState: { n: 1 }, nextTurn: 2, updatedAt: at(2) });
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => [m.turnIndex, m.role, m.content])).toEqual([
          [0, "user", "hello"],
          [1, "assistant", "Echo: hello"],
        ]);
      });

      it("fails when the id exists, and stores nothing of the run", async () => {
        const c = await conversation();
        const first = c.run("a");
        await ticketOf(storage, first.begin(0));
        const again = c.run("b");
        await expect(storage.beginRun(again.begin(1))).rejects.toThrow();
        expect(await storage.findRun(again.id)).toBeNull();
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.content)).toEqual(["a"]);
        expect(await storage.findConversation(c.id)).toMatchObject({ nextTurn: 1 });
      });

      it("fails for a channel that does not exist, and stores nothing", async () => {
        const c = await conversation();
        const missing = new Conversation(storage, { ...c.channel, id: crypto.randomUUID() });
        const run = missing.run("x");
        await expect(storage.beginRun(run.begin(0))).rejects.toThrow();
        expect(await storage.findConversation(missing.id)).toBeNull();
        expect(await storage.findRun(run.id)).toBeNull();
      });

      it("is one transaction: a run id already stored leaves no conversation behind (where the claim writes the run's row)", async () => {
        const c = await conversation();
        const first = c.run("a");
        await ticketOf(storage, first.begin(0));
        await storage.completeRun(first.complete({ ticket: 0, messages: [], seconds: 1 }));
        const other = await conversation();
        const run = other.run("b");
        run.id = first.id;
        if (!(await writesRunAtClaim())) {
          // The claim writes no run: the id is the outcome's to store.
          expect((await ticketOf(storage, run.begin(0))).claimed).not.toBeNull();
          return;
        }
        await expect(storage.beginRun(run.begin(0))).rejects.toThrow();
        expect(await storage.findConversation(other.id)).toBeNull();
        expect(await storage.listRecentMessages(other.id, 10)).toEqual([]);
      });
    });

    describe("a conversation's language (webhook channels)", () => {
      it("is stored with a conversation that beginRun or storeRun creates, and read back; null when not given", async () => {
        const c = await conversation();
        const begun = c.run("bonjour").begin(0);
        const ticket = await ticketOf(storage, { ...begun, conversation: { ...begun.conversation, language: "fr_FR" } });
        expect(ticket.claimed?.conversation.language).toBe("fr_FR");
        expect((await storage.findConversation(c.id))?.language).toBe("fr_FR");

        const whole = await conversation();
        const run = whole.run("hallo");
        const completed = run.complete({ ticket: 0, messages: ["Hallo!"], seconds: 1, user: true });
        await storage.storeRun({ run: completed.run, conversation: { ...run.begin(0).conversation, language: "de_DE" }, messages: completed.messages });
        expect((await storage.findConversation(whole.id))?.language).toBe("de_DE");

        const plain = await conversation();
        await ticketOf(storage, plain.run("hi").begin(0));
        expect((await storage.findConversation(plain.id))?.language).toBeNull();
      });
    });

    describe("storeRun: a whole run that started a conversation", () => {
      it("stores the conversation, its messages from turn 0 and the run at once; the next run takes ticket 1 and its turn", async () => {
        const c = await conversation();
        const first = c.run("hello");
        const { run, messages } = first.complete({ ticket: 0, messages: ["Echo: hello"], user: true, flowState: { n: 1 }, seconds: 2 });
        const stored = await storage.storeRun({ run, conversation: { ...first.begin(0).conversation, isNew: true }, messages, flowState: { n: 1 } });
        expect(stored.map((m) => [m.turnIndex, m.role, m.content])).toEqual([
          [0, "user", "hello"],
          [1, "assistant", "Echo: hello"],
        ]);
        expect(await storage.listRecentMessages(c.id, 10)).toEqual(stored);
        expect(await storage.findRun(first.id)).toEqual(run);
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "bot", flowState: { n: 1 }, nextTurn: 2 });
        const second = c.run("again");
        const ticket = await ticketOf(storage, second.begin(3, { isNew: false }));
        expect(ticket.ticket).toBe(1);
        expect(ticket.claimed?.conversation.flowState).toEqual({ n: 1 });
        expect(ticket.claimed?.userMessage.turnIndex).toBe(2);
      });

      it("sets the mode it is given, and fails storing nothing when the conversation's id exists", async () => {
        const c = await conversation();
        const first = c.run("hand me over");
        const done = first.complete({ ticket: 0, messages: ["Connecting you"], user: true, status: "pending", seconds: 1 });
        await storage.storeRun({
          run: done.run,
          conversation: { ...first.begin(0).conversation, isNew: true },
          messages: done.messages,
          mode: "livechat_waiting",
        });
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "livechat_waiting", nextTurn: 2 });
        const again = c.run("same id");
        const twice = again.complete({ ticket: 0, messages: ["x"], user: true, seconds: 2 });
        await expect(
          storage.storeRun({ run: twice.run, conversation: { ...again.begin(0).conversation, isNew: true }, messages: twice.messages }),
        ).rejects.toThrow();
        expect(await storage.findRun(again.id)).toBeNull();
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.content)).toEqual(["hand me over", "Connecting you"]);
      });
    });

    describe("unknown conversations", () => {
      it("beginRun on a conversation that does not exist gives null; completeRun throws; claimTurn gives null; renewTurn false", async () => {
        const c = await conversation();
        const run = c.run("x");
        expect(await storage.beginRun(run.begin(0, { isNew: false }))).toBeNull();
        expect(await storage.claimTurn(run.claim(0, 0))).toBeNull();
        expect(await storage.renewTurn(c.id, 0, at(10))).toBe(false);
        await expect(storage.completeRun(run.complete({ ticket: 0, messages: ["y"], seconds: 1 }))).rejects.toThrow();
        expect(await storage.findConversation(c.id)).toBeNull();
        expect(await storage.findRun(run.id)).toBeNull();
        expect(await storage.findRun(crypto.randomUUID())).toBeNull();
        expect(await storage.listRecentMessages(c.id, 10)).toEqual([]);
      });

      it("beginRun on another channel's or tenant's conversation gives null and changes nothing: its next run takes the next ticket", async () => {
        const c = await conversation();
        const first = c.run("first");
        await ticketOf(storage, first.begin(0));
        await storage.completeRun(first.complete({ ticket: 0, messages: ["one"], seconds: 1 }));
        const before = await storage.findConversation(c.id);
        const { channel: other } = await seed();
        const sameTenant = { ...channelRecord(c.channel.tenantId), id: crypto.randomUUID() };
        await storage.createChannel(sameTenant, keyRecord(sameTenant, `hash-${crypto.randomUUID()}`));
        for (const intruder of [other, sameTenant]) {
          const run = c.run("intruder");
          const begin = run.begin(2, { isNew: false });
          begin.conversation = { ...begin.conversation, tenantId: intruder.tenantId, channelId: intruder.id };
          begin.run = { ...begin.run, tenantId: intruder.tenantId, channelId: intruder.id };
          expect(await storage.beginRun(begin)).toBeNull();
          expect(await storage.findRun(run.id)).toBeNull();
        }
        expect(await storage.findConversation(c.id)).toEqual(before);
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.content)).toEqual(["first", "one"]);
        const second = c.run("second");
        expect(await ticketOf(storage, second.begin(3, { isNew: false }))).toMatchObject({ ticket: 1, claimed: { userMessage: { turnIndex: 2 } } });
      });
    });

    describe("the run queue", () => {
      it("makes a second run wait for the first, then hands it the flow state the first stored", async () => {
        const c = await conversation();
        const first = c.run("one");
        await ticketOf(storage, first.begin(0));
        const second = c.run("two");
        const ticket = await ticketOf(storage, second.begin(1, { isNew: false }));
        expect(ticket).toEqual({ ticket: 1, claimed: null });
        // Nothing of the waiting run is stored yet.
        expect(await storage.findRun(second.id)).toBeNull();
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.content)).toEqual(["one"]);
        expect(await storage.claimTurn(second.claim(1, 2))).toBeNull();
        expect(await storage.claimTurn(second.claim(1, 3))).toBeNull();

        await storage.completeRun(first.complete({ ticket: 0, messages: ["reply one"], flowState: { count: 1 }, seconds: 4 }));
        const claimed = await storage.claimTurn(second.claim(1, 5));
        expect(claimed?.conversation).toEqual({
          id: c.id,
          tenantId: c.channel.tenantId,
          channelId: c.channel.id,
          mode: "bot",
          modeSince: at(0),
          flowState: { count: 1 },
          nextTurn: 3,
          livechatConversationId: null,
          language: null,
          createdAt: at(0),
          updatedAt: at(5),
        });
        expect(claimed?.userMessage).toEqual({ ...second.userMessage, conversationId: c.id, turnIndex: 2 });
        await expectInFlight(second.id, second.record);
        // Claimed once: a second claim of the same ticket fails on the run already stored
        // (a run claims its ticket once; a store that writes the row with the outcome has
        // nothing to refuse it with).
        if (await writesRunAtClaim()) await expect(storage.claimTurn(second.claim(1, 6))).rejects.toThrow();

        await storage.completeRun(second.complete({ ticket: 1, messages: ["reply two"], flowState: { count: 2 }, seconds: 7 }));
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => [m.turnIndex, m.content, m.runId])).toEqual([
          [0, "one", first.id],
          [1, "reply one", first.id],
          [2, "two", second.id],
          [3, "reply two", second.id],
        ]);
        expect(await storage.findConversation(c.id)).toMatchObject({ flowState: { count: 2 }, nextTurn: 4 });
        // The queue is free again: the next run claims at once.
        const third = c.run("three");
        const next = await ticketOf(storage, third.begin(8, { isNew: false }));
        expect(next.ticket).toBe(2);
        expect(next.claimed?.userMessage.turnIndex).toBe(4);
        expect(next.claimed?.conversation.flowState).toEqual({ count: 2 });
      });

      it("serves several waiting runs in ticket order, with contiguous turn indexes", async () => {
        const c = await conversation();
        const runs = ["a", "b", "c", "d"].map((name) => c.run(name));
        await ticketOf(storage, (runs[0] as TestRun).begin(0));
        for (let i = 1; i < runs.length; i++)
          expect(await ticketOf(storage, (runs[i] as TestRun).begin(i, { isNew: false }))).toEqual({ ticket: i, claimed: null });
        for (let i = 0; i < runs.length; i++) {
          const run = runs[i] as TestRun;
          if (i > 0) {
            // Only the run whose ticket is served may claim.
            for (let later = i + 1; later < runs.length; later++) expect(await storage.claimTurn((runs[later] as TestRun).claim(later, 10 * i))).toBeNull();
            expect((await storage.claimTurn(run.claim(i, 10 * i)))?.userMessage.turnIndex).toBe(3 * i);
          }
          await expectInFlight(run.id);
          const stored = await storage.completeRun(run.complete({ ticket: i, messages: [`${run.name} 1`, `${run.name} 2`], seconds: 10 * i + 1 }));
          expect(stored.map((m) => m.turnIndex)).toEqual([3 * i + 1, 3 * i + 2]);
        }
        const messages = await storage.listRecentMessages(c.id, 100);
        expect(messages.map((m) => m.turnIndex)).toEqual(Array.from({ length: 12 }, (_, i) => i));
        expect(messages.map((m) => m.content)).toEqual(["a", "a 1", "a 2", "b", "b 1", "b 2", "c", "c 1", "c 2", "d", "d 1", "d 2"]);
        for (const run of runs) expect((await storage.findRun(run.id))?.status).toBe("success");
      });

      it("renews the lease of the run holding the turn only", async () => {
        const c = await conversation();
        const first = c.run("a");
        await ticketOf(storage, first.begin(0));
        const second = c.run("b");
        await ticketOf(storage, second.begin(1, { isNew: false }));
        expect(await storage.renewTurn(c.id, 0, at(60))).toBe(true);
        expect(await storage.renewTurn(c.id, 1, at(60))).toBe(false);
        expect(await storage.renewTurn(c.id, 7, at(60))).toBe(false);
        // Renewed to 60 s: the waiting run cannot take the turn over at 45 s.
        expect(await storage.claimTurn(second.claim(1, 45))).toBeNull();
        await storage.completeRun(first.complete({ ticket: 0, messages: [], seconds: 46 }));
        expect(await storage.renewTurn(c.id, 0, at(90))).toBe(false);
        expect(await storage.claimTurn(second.claim(1, 47))).not.toBeNull();
        expect(await storage.renewTurn(c.id, 1, at(90))).toBe(true);
      });

      it("lets the next run take a lapsed turn over: the stale run is stored cancelled", async () => {
        const c = await conversation();
        const stale = c.run("stale");
        await ticketOf(storage, stale.begin(0));
        const waiting = c.run("waiting");
        await ticketOf(storage, waiting.begin(1, { isNew: false }));
        // The lease runs until 30 s.
        expect(await storage.claimTurn(waiting.claim(1, 29))).toBeNull();
        expect(await storage.claimTurn(waiting.claim(1, LEASE_SECONDS))).toBeNull();
        const claimed = await storage.claimTurn(waiting.claim(1, 31));
        expect(claimed?.userMessage).toMatchObject({ turnIndex: 1, content: "waiting", runId: waiting.id });
        const cancelled = await storage.findRun(stale.id);
        expect(cancelled).toMatchObject({ status: "cancelled", completedAt: at(31), startedAt: at(0) });
        expect(cancelled?.error).toMatch(/^The run was abandoned: /);
        await expectInFlight(waiting.id);
        // The stale run no longer holds the turn; the new holder does.
        expect(await storage.renewTurn(c.id, 0, at(100))).toBe(false);
        expect(await storage.renewTurn(c.id, 1, at(100))).toBe(true);
        await storage.completeRun(waiting.complete({ ticket: 1, messages: ["done"], seconds: 32 }));
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => [m.turnIndex, m.content])).toEqual([
          [0, "stale"],
          [1, "waiting"],
          [2, "done"],
        ]);
      });

      it("a run whose lapsed turn was taken over still stores its outcome late, but not the conversation's state", async () => {
        const c = await conversation();
        const stale = c.run("stale");
        await ticketOf(storage, stale.begin(0));
        const next = c.run("next");
        await ticketOf(storage, next.begin(1, { isNew: false }));
        expect(await storage.claimTurn(next.claim(1, 31))).not.toBeNull();
        // The stale run's instance was only slow: it ends now, after the takeover.
        await storage.completeRun(
          stale.complete({ ticket: 0, messages: ["late"], flowState: { from: "stale" }, mode: handover("bot", at(0), 32), seconds: 32 }),
        );
        expect(await storage.findRun(stale.id)).toMatchObject({ status: "success" });
        expect(await storage.findConversation(c.id)).toMatchObject({ flowState: undefined, mode: "bot" });
        // The run holding the turn is not disturbed: it renews, and its state is stored.
        expect(await storage.renewTurn(c.id, 1, at(100))).toBe(true);
        await storage.completeRun(next.complete({ ticket: 1, messages: ["done"], flowState: { from: "next" }, seconds: 33 }));
        expect(await storage.findConversation(c.id)).toMatchObject({ flowState: { from: "next" }, mode: "bot" });
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => [m.turnIndex, m.content])).toEqual([
          [0, "stale"],
          [1, "next"],
          [2, "late"],
          [3, "done"],
        ]);
      });

      it("takes over a lapsed turn for the run that sees the lapse, past the tickets between: their runs are passed over and queue again", async () => {
        const c = await conversation();
        const stale = c.run("stale");
        await ticketOf(storage, stale.begin(0));
        const second = c.run("second");
        await ticketOf(storage, second.begin(1, { isNew: false }));
        const third = c.run("third");
        await ticketOf(storage, third.begin(2, { isNew: false }));
        // The third run sees the lapse first: ticket 0 is cancelled, and the third claims at once
        // rather than wait for the second's claim time too (its instance may be gone as well).
        expect((await storage.claimTurn(third.claim(2, 40, { claimUntil: 70 })))?.userMessage.turnIndex).toBe(1);
        expect((await storage.findRun(stale.id))?.status).toBe("cancelled");
        // The second run, alive after all, finds its ticket passed over, and queues again.
        await expect(storage.claimTurn(second.claim(1, 41))).rejects.toBeInstanceOf(TurnPassedOver);
        expect((await ticketOf(storage, second.begin(42, { isNew: false }))).claimed).toBeNull();
      });

      it("skips the ticket of a run cancelled while it waited, which stores its user message and no state", async () => {
        const c = await conversation();
        const first = c.run("first");
        await ticketOf(storage, first.begin(0));
        const gone = c.run("gone");
        await ticketOf(storage, gone.begin(1, { isNew: false }));
        const third = c.run("third");
        await ticketOf(storage, third.begin(2, { isNew: false }));

        const cancelled = gone.complete({
          ticket: 1,
          claimed: false,
          status: "cancelled",
          messages: [],
          user: true,
          flowState: { from: "gone" },
          mode: handover("bot", at(0), 3),
          seconds: 3,
        });
        const stored = await storage.completeRun(cancelled);
        expect(stored).toEqual([{ ...gone.userMessage, conversationId: c.id, turnIndex: 1 }]);
        expect(await storage.findRun(gone.id)).toEqual(cancelled.run);
        // The first run still holds the turn, and its state and mode are untouched.
        expect(await storage.findConversation(c.id)).toMatchObject({ flowState: undefined, mode: "bot", nextTurn: 2 });
        expect(await storage.renewTurn(c.id, 0, at(10))).toBe(true);
        expect(await storage.claimTurn(third.claim(2, 4))).toBeNull();

        await storage.completeRun(first.complete({ ticket: 0, messages: ["reply"], flowState: { from: "first" }, seconds: 5 }));
        const claimed = await storage.claimTurn(third.claim(2, 6));
        expect(claimed?.conversation).toMatchObject({ flowState: { from: "first" }, mode: "bot" });
        expect(claimed?.userMessage.turnIndex).toBe(3);
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => [m.turnIndex, m.content])).toEqual([
          [0, "first"],
          [1, "gone"],
          [2, "reply"],
          [3, "third"],
        ]);
      });

      it("passes the turn on when the run whose turn came is cancelled before it claims it", async () => {
        const c = await conversation();
        const first = c.run("first");
        await ticketOf(storage, first.begin(0));
        const gone = c.run("gone");
        await ticketOf(storage, gone.begin(1, { isNew: false }));
        const third = c.run("third");
        await ticketOf(storage, third.begin(2, { isNew: false }));
        await storage.completeRun(first.complete({ ticket: 0, messages: ["reply"], seconds: 1 }));
        // Ticket 1 is served, but its run stops before claiming.
        expect(await storage.claimTurn(third.claim(2, 2))).toBeNull();
        await storage.completeRun(gone.complete({ ticket: 1, claimed: false, status: "cancelled", messages: [], user: true, seconds: 3 }));
        const claimed = await storage.claimTurn(third.claim(2, 4));
        expect(claimed?.userMessage.turnIndex).toBe(3);
      });

      it("frees the queue when the last waiting run is cancelled", async () => {
        const c = await conversation();
        const first = c.run("first");
        await ticketOf(storage, first.begin(0));
        const gone = c.run("gone");
        await ticketOf(storage, gone.begin(1, { isNew: false }));
        await storage.completeRun(gone.complete({ ticket: 1, claimed: false, status: "cancelled", messages: [], user: true, seconds: 1 }));
        await storage.completeRun(first.complete({ ticket: 0, messages: ["reply"], seconds: 2 }));
        const next = c.run("next");
        const ticket = await ticketOf(storage, next.begin(3, { isNew: false }));
        expect(ticket.ticket).toBe(2);
        expect(ticket.claimed?.userMessage.turnIndex).toBe(3);
      });

      it("skips a cancelled waiting run when a lapsed turn is taken over", async () => {
        const c = await conversation();
        const stale = c.run("stale");
        await ticketOf(storage, stale.begin(0));
        const gone = c.run("gone");
        await ticketOf(storage, gone.begin(1, { isNew: false }));
        const third = c.run("third");
        await ticketOf(storage, third.begin(2, { isNew: false }));
        await storage.completeRun(gone.complete({ ticket: 1, claimed: false, status: "cancelled", messages: [], user: true, seconds: 1 }));
        const claimed = await storage.claimTurn(third.claim(2, 40));
        expect(claimed?.userMessage.turnIndex).toBe(2);
        expect((await storage.findRun(stale.id))?.status).toBe("cancelled");
        expect((await storage.findRun(gone.id))?.status).toBe("cancelled");
        expect((await storage.findRun(gone.id))?.error).toBeNull();
      });
    });

    describe("flow state and mode", () => {
      it("keeps them unless given; undefined clears the flow state; a run cancelled while waiting never sets them", async () => {
        const c = await conversation();
        const step = async (options: Partial<Omit<CompleteOptions, "mode">> & { mode?: ConversationMode }) => {
          const before = await storage.findConversation(c.id);
          const run = c.run("u");
          const ticket = await ticketOf(storage, run.begin(0, { isNew: !c.started }));
          c.started = true;
          const { mode, ...rest } = options;
          const change = mode && before ? { from: before.mode, since: before.modeSince, to: mode, at: at(1) } : undefined;
          await storage.completeRun(run.complete({ ticket: ticket.ticket, messages: ["a"], seconds: 1, ...rest, ...(change ? { mode: change } : {}) }));
          return storage.findConversation(c.id);
        };
        expect(await step({ flowState: { n: 1 } })).toMatchObject({ flowState: { n: 1 }, mode: "bot" });
        expect(await step({})).toMatchObject({ flowState: { n: 1 }, mode: "bot" });
        expect(await step({ mode: "livechat_waiting" })).toMatchObject({ flowState: { n: 1 }, mode: "livechat_waiting", modeSince: at(1) });
        expect(await step({ flowState: null })).toMatchObject({ flowState: null, mode: "livechat_waiting" });
        expect(await step({ flowState: "text", mode: "bot" })).toMatchObject({ flowState: "text", mode: "bot" });
        const cleared = await step({ flowState: undefined });
        expect(cleared?.flowState).toBeUndefined();
        expect(cleared?.mode).toBe("bot");
        expect(await step({ flowState: [1, { deep: true }] })).toMatchObject({ flowState: [1, { deep: true }] });
      });

      it("hands the stored flow state to the next claim as a copy", async () => {
        const c = await conversation();
        const first = c.run("a");
        await ticketOf(storage, first.begin(0));
        const state = { list: [1] };
        await storage.completeRun(first.complete({ ticket: 0, messages: [], flowState: state, seconds: 1 }));
        state.list.push(2);
        const second = c.run("b");
        const claimed = (await ticketOf(storage, second.begin(2, { isNew: false }))).claimed as ClaimedTurn;
        expect(claimed.conversation.flowState).toEqual({ list: [1] });
        (claimed.conversation.flowState as { list: number[] }).list.push(3);
        expect((await storage.findConversation(c.id))?.flowState).toEqual({ list: [1] });
      });
    });

    describe("completeRun", () => {
      it("stores a run without messages, leaving the turn counter alone", async () => {
        const c = await conversation();
        const run = c.run("a");
        await ticketOf(storage, run.begin(0));
        expect(await storage.completeRun(run.complete({ ticket: 0, messages: [], seconds: 1 }))).toEqual([]);
        expect((await storage.findConversation(c.id))?.nextTurn).toBe(1);
        expect(await storage.findRun(run.id)).toMatchObject({ status: "success", durationMs: 1000 });
      });

      it("returns the messages as stored, and stores tool calls and live-chat fields", async () => {
        const c = await conversation();
        const run = c.run("q");
        await ticketOf(storage, run.begin(0));
        const input = run.complete({ ticket: 0, messages: [], seconds: 1 });
        input.messages.push(
          { ...newMessage("", "assistant", run.id), toolCalls: [{ id: "call_1", name: "search", arguments: { q: "x" } }] },
          { ...newMessage("result", "tool", run.id), toolCallId: "call_1" },
          { ...newMessage("human here", "assistant", null), origin: "livechat", stepId: null, nodeType: null, livechatMessageId: "lc-1", sender: "agent" },
        );
        const expected = structuredClone(input.messages).map((message, i) => ({ ...message, conversationId: c.id, turnIndex: i + 1 }));
        const stored = await storage.completeRun(input);
        expect(stored).toEqual(expected);
        // What was written and what was returned are not what is stored.
        toolCallsOf(input.messages[0]).push("changed");
        toolCallsOf(stored[0]).push("changed");
        const read = await storage.listRecentMessages(c.id, 10);
        expect(read.slice(1)).toEqual(expected);
        toolCallsOf(read[1]).push("changed");
        expect((await storage.listRecentMessages(c.id, 10)).slice(1)).toEqual(expected);
      });

      it("keeps a message's metadata (a chat platform's ids on a user's message), and null where there is none", async () => {
        const c = await conversation();
        const run = c.run("hi");
        const begin = run.begin(0);
        const ids = { platform: "telegram", platform_message_id: "5:1", nested: { user: 5 } };
        begin.userMessage = { ...begin.userMessage, metadata: ids };
        await ticketOf(storage, begin);
        await storage.completeRun(run.complete({ ticket: 0, messages: ["hello"], seconds: 1 }));
        expect((await storage.listRecentMessages(c.id, 10)).map((message) => message.metadata)).toEqual([ids, null]);
      });

      it("keeps any text as given, U+0000 and U+0001 included (PostgreSQL's text cannot hold U+0000)", async () => {
        const odd = "a\u0000b\u0001c\u0001\u0000d\u00010\u00011 \u0000";
        const c = await conversation();
        const run = c.run(odd);
        await ticketOf(storage, run.begin(0));
        const input = run.complete({ ticket: 0, messages: [`Echo: ${odd}`], seconds: 1, status: "error" });
        input.run.error = odd;
        await storage.completeRun(input);
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.content)).toEqual([odd, `Echo: ${odd}`]);
        expect((await storage.findRun(run.id))?.error).toBe(odd);
        const { channel } = await seed({ name: odd });
        expect((await storage.findChannel(channel.id))?.name).toBe(odd);
      });

      it("is one transaction: a failing run insert allocates no turns, stores no message and keeps the queue", async () => {
        // A run already stored, on another conversation.
        const done = (await conversation()).run("done");
        await ticketOf(storage, done.begin(0));
        await storage.completeRun(done.complete({ ticket: 0, messages: [], seconds: 1 }));
        const c = await conversation();
        const first = c.run("a");
        await ticketOf(storage, first.begin(0));
        const waiting = c.run("b");
        await ticketOf(storage, waiting.begin(1, { isNew: false }));
        // A cancelled waiting run stored under an id that exists fails whole.
        const duplicate = waiting.complete({ ticket: 1, claimed: false, status: "cancelled", messages: ["x"], user: true, seconds: 1 });
        duplicate.run.id = done.id;
        await expect(storage.completeRun(duplicate)).rejects.toThrow();
        expect(await storage.findConversation(c.id)).toMatchObject({ nextTurn: 1 });
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.content)).toEqual(["a"]);
        await expectInFlight(first.id);
        await storage.completeRun(first.complete({ ticket: 0, messages: ["reply"], seconds: 2 }));
        expect((await storage.claimTurn(waiting.claim(1, 3)))?.userMessage.turnIndex).toBe(2);
      });

      it("records are copies: a run read back does not alias the store", async () => {
        const c = await conversation();
        const run = c.run("a");
        await ticketOf(storage, run.begin(0));
        const input = run.complete({ ticket: 0, messages: [], seconds: 1 });
        await storage.completeRun(input);
        input.run.executionOrder.push("changed");
        const read = await storage.findRun(run.id);
        expect(read?.executionOrder).toEqual(["echo"]);
        read?.executionOrder.push("changed");
        (read?.result as { ok: boolean }).ok = false;
        expect(await storage.findRun(run.id)).toMatchObject({ executionOrder: ["echo"], result: { ok: true } });
      });
    });

    describe("live chat", () => {
      /** A conversation handed over at second 1 (its first run's completion), waiting. */
      async function handedOver() {
        const c = await conversation();
        const run = c.run("help");
        await ticketOf(storage, run.begin(0));
        await storage.completeRun(run.complete({ ticket: 0, messages: ["Connecting you"], status: "pending", mode: handover("bot", at(0), 1), seconds: 1 }));
        return c;
      }
      const agentMessage = (content: string, id: string): NewMessage => ({
        ...newMessage(content, "assistant", null),
        origin: "livechat",
        stepId: null,
        nodeType: null,
        livechatMessageId: id,
        sender: "agent",
      });

      it("a run's mode change is a compare-and-set on the mode and the time it was entered", async () => {
        const c = await handedOver();
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "livechat_waiting", modeSince: at(1), livechatConversationId: "lc-1" });
        // A run that read the conversation before the handover does not undo it.
        const late = c.run("late");
        const ticket = await ticketOf(storage, late.begin(2, { isNew: false }));
        await storage.completeRun(
          late.complete({ ticket: ticket.ticket, messages: [], seconds: 3, mode: { from: "bot", since: at(0), to: "bot", at: at(3) } }),
        );
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "livechat_waiting", modeSince: at(1) });
        // One that read it as it is moves it, and keeps the live chat's id when given none.
        const next = c.run("next");
        const t2 = await ticketOf(storage, next.begin(4, { isNew: false }));
        await storage.completeRun(
          next.complete({ ticket: t2.ticket, messages: ["bot again"], seconds: 5, mode: { from: "livechat_waiting", since: at(1), to: "bot", at: at(5) } }),
        );
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "bot", modeSince: at(5), livechatConversationId: "lc-1" });
      });

      it("a run's handover enters the waiting mode anew, even from a wait that expired (still stored as waiting)", async () => {
        const c = await handedOver();
        const again = c.run("hello again");
        const ticket = await ticketOf(storage, again.begin(6, { isNew: false }));
        await storage.completeRun(
          again.complete({ ticket: ticket.ticket, messages: ["Connecting you"], status: "pending", seconds: 7, mode: handover("livechat_waiting", at(1), 7) }),
        );
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "livechat_waiting", modeSince: at(7), livechatConversationId: "lc-7" });
      });

      it("updateLiveChat appends in turn order and moves the mode, only from the mode read", async () => {
        const c = await handedOver();
        const change = { from: "livechat_waiting", since: at(1), to: "livechat_active", at: at(2), livechatConversationId: "desk-9" } as const;
        const moved = await storage.updateLiveChat({ conversationId: c.id, change, messages: [] });
        expect(moved?.conversation).toMatchObject({ mode: "livechat_active", modeSince: at(2), livechatConversationId: "desk-9", nextTurn: 2 });
        expect(moved?.messages).toEqual([]);
        // The same change again finds the mode moved: nothing is written.
        expect(await storage.updateLiveChat({ conversationId: c.id, change, messages: [agentMessage("lost", "x")] })).toBeNull();
        expect(await storage.updateLiveChat({ conversationId: crypto.randomUUID(), change, messages: [] })).toBeNull();
        // Staying in a mode keeps the time it was entered.
        const stay = { from: "livechat_active", since: at(2), to: "livechat_active", at: at(3) } as const;
        const sent = await storage.updateLiveChat({
          conversationId: c.id,
          change: stay,
          messages: [agentMessage("Hi, I am Ann", "m1"), agentMessage("How can I help?", "m2")],
        });
        expect(sent?.messages.map((m) => [m.turnIndex, m.content, m.origin, m.sender, m.livechatMessageId])).toEqual([
          [2, "Hi, I am Ann", "livechat", "agent", "m1"],
          [3, "How can I help?", "livechat", "agent", "m2"],
        ]);
        expect(sent?.conversation).toMatchObject({ mode: "livechat_active", modeSince: at(2), nextTurn: 4 });
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.turnIndex)).toEqual([0, 1, 2, 3]);
        // A run after them takes the next turn.
        const run = c.run("thanks");
        expect((await ticketOf(storage, run.begin(4, { isNew: false }))).claimed?.userMessage.turnIndex).toBe(4);
      });

      it("stores the user's message of a run as a live-chat message when a human has the conversation", async () => {
        const c = await handedOver();
        const run = c.run("are you there?");
        const ticket = await ticketOf(storage, run.begin(2, { isNew: false }));
        const turn = ticket.claimed?.userMessage.turnIndex as number;
        const input = run.complete({ ticket: ticket.ticket, messages: [], status: "pending", seconds: 2, liveChatUserTurn: turn });
        input.liveChatUserMessageId = "lc-message-1";
        await storage.completeRun(input);
        const [message] = await storage.listMessagesAfter(c.id, turn - 1, 10);
        expect(message).toMatchObject({
          turnIndex: turn,
          origin: "livechat",
          sender: "user",
          role: "user",
          content: "are you there?",
          livechatMessageId: "lc-message-1",
        });
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "livechat_waiting", modeSince: at(1) });
      });

      it("lists a tenant's conversations in the given modes, longest in their mode first", async () => {
        const { channel } = await seed();
        const ids: string[] = [];
        for (const seconds of [3, 1, 2]) {
          const c = new Conversation(storage, channel);
          const run = c.run("help");
          await ticketOf(storage, run.begin(0));
          await storage.completeRun(run.complete({ ticket: 0, messages: [], status: "pending", mode: handover("bot", at(0), seconds), seconds }));
          ids[seconds] = c.id;
        }
        const idle = new Conversation(storage, channel);
        await ticketOf(storage, idle.run("hi").begin(0));
        const listed = await storage.listLiveChatConversations({ tenantId: channel.tenantId, modes: ["livechat_waiting", "livechat_active"], limit: 10 });
        expect(listed.map((c) => c.id)).toEqual([ids[1], ids[2], ids[3]]);
        expect((await storage.listLiveChatConversations({ tenantId: channel.tenantId, modes: ["livechat_waiting"], limit: 2 })).map((c) => c.id)).toEqual([
          ids[1],
          ids[2],
        ]);
        expect(await storage.listLiveChatConversations({ tenantId: channel.tenantId, modes: ["livechat_active"], limit: 10 })).toEqual([]);
        expect(await storage.listLiveChatConversations({ tenantId: crypto.randomUUID(), modes: ["livechat_waiting"], limit: 10 })).toEqual([]);
      });

      it("countLiveChatWaiting counts every tenant's waits that did not expire by their channel's timeout", async (test) => {
        const count = storage.countLiveChatWaiting?.bind(storage);
        if (!count) return test.skip("countLiveChatWaiting is optional");
        const T = 1000;
        const counts = async () => Promise.all([T + 50, T + 150, T + 700].map((seconds) => count({ at: at(seconds), defaultWaitTimeoutMs: 600_000 })));
        // Other tests' waits: what this one adds is counted on top of them.
        const before = await counts();
        const plus = (...added: number[]) => before.map((n, i) => n + (added[i] as number));
        const waiting = async (channel: ChannelRecord) => {
          const c = new Conversation(storage, channel);
          const run = c.run("help");
          await ticketOf(storage, run.begin(0));
          await storage.completeRun(run.complete({ ticket: 0, messages: [], status: "pending", mode: handover("bot", at(0), T), seconds: T }));
          return c;
        };
        const short = (await seed({ livechatWaitTimeoutSeconds: 100 })).channel;
        const other = (await seed()).channel;
        await waiting(short);
        await waiting(other);
        const taken = await waiting(other);
        const idle = new Conversation(storage, other);
        await ticketOf(storage, idle.run("hi").begin(0));
        // 100 s after the handover the short channel's wait expired; 700 s after, the default one's.
        expect(await counts()).toEqual(plus(3, 2, 0));
        const change: ModeChange = { from: "livechat_waiting", since: at(T), to: "livechat_active", at: at(T + 10), livechatConversationId: "agent" };
        expect(await storage.updateLiveChat({ conversationId: taken.id, change, messages: [] })).not.toBeNull();
        expect(await counts()).toEqual(plus(2, 1, 0));
      });

      it("listMessagesAfter reads the messages after a turn, oldest first", async () => {
        const c = await handedOver();
        expect((await storage.listMessagesAfter(c.id, -1, 10)).map((m) => m.content)).toEqual(["help", "Connecting you"]);
        expect((await storage.listMessagesAfter(c.id, 0, 10)).map((m) => m.content)).toEqual(["Connecting you"]);
        expect((await storage.listMessagesAfter(c.id, -1, 1)).map((m) => m.content)).toEqual(["help"]);
        expect(await storage.listMessagesAfter(c.id, 1, 10)).toEqual([]);
      });

      it("storeRun of a handover stores when the wait began", async () => {
        const c = await conversation();
        const first = c.run("hand me over");
        const done = first.complete({ ticket: 0, messages: ["Connecting you"], user: true, status: "pending", seconds: 4 });
        await storage.storeRun({
          run: done.run,
          conversation: { ...first.begin(0).conversation, isNew: true },
          messages: done.messages,
          mode: "livechat_waiting",
        });
        expect(await storage.findConversation(c.id)).toMatchObject({ mode: "livechat_waiting", modeSince: at(4), livechatConversationId: null });
      });

      it("gives contiguous turn indexes to agent messages racing runs", async () => {
        const c = await handedOver();
        await storage.updateLiveChat({
          conversationId: c.id,
          change: { from: "livechat_waiting", since: at(1), to: "livechat_active", at: at(2) },
          messages: [],
        });
        const runs = Array.from({ length: 10 }, (_, i) => c.run(`user ${i}`));
        const agents = Array.from({ length: 10 }, (_, i) =>
          storage.updateLiveChat({
            conversationId: c.id,
            change: { from: "livechat_active", since: at(2), to: "livechat_active", at: at(3) },
            messages: [agentMessage(`agent ${i}`, `a${i}`)],
          }),
        );
        const users = runs.map(async (run, i) => {
          const ticket = await ticketOf(storage, run.begin(3 + i, { isNew: false }));
          let claimed = ticket.claimed;
          while (!claimed) {
            await new Promise((resolve) => setTimeout(resolve, 2));
            claimed = await storage.claimTurn(run.claim(ticket.ticket, 3 + i));
          }
          await storage.completeRun(
            run.complete({ ticket: ticket.ticket, messages: [], status: "pending", seconds: 4 + i, liveChatUserTurn: claimed.userMessage.turnIndex }),
          );
        });
        await Promise.all([...agents, ...users]);
        const messages = await storage.listRecentMessages(c.id, 100);
        expect(messages.map((m) => m.turnIndex)).toEqual(Array.from({ length: 22 }, (_, i) => i));
        expect(messages.filter((m) => m.sender === "agent")).toHaveLength(10);
        expect(messages.filter((m) => m.sender === "user")).toHaveLength(10);
      });
    });

    describe("listRecentMessages", () => {
      it("returns the most recent N messages of the conversation, oldest first", async () => {
        const c = await conversation();
        const other = new Conversation(storage, c.channel);
        for (let i = 0; i < 5; i++) {
          const run = c.run(`u${i}`);
          const ticket = await ticketOf(storage, run.begin(i, { isNew: i === 0 }));
          await storage.completeRun(run.complete({ ticket: ticket.ticket, messages: [`a${i}`], seconds: i }));
        }
        const elsewhere = other.run("elsewhere");
        await ticketOf(storage, elsewhere.begin(0));

        expect((await storage.listRecentMessages(c.id, 3)).map((m) => [m.turnIndex, m.content])).toEqual([
          [7, "a3"],
          [8, "u4"],
          [9, "a4"],
        ]);
        expect((await storage.listRecentMessages(c.id, 100)).map((m) => m.turnIndex)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        expect((await storage.listRecentMessages(c.id, 10)).map((m) => m.turnIndex)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        expect((await storage.listRecentMessages(c.id, 1)).map((m) => m.content)).toEqual(["a4"]);
        expect(await storage.listRecentMessages(c.id, 0)).toEqual([]);
        expect((await storage.listRecentMessages(other.id, 100)).map((m) => m.content)).toEqual(["elsewhere"]);
        expect(await storage.listRecentMessages(crypto.randomUUID(), 10)).toEqual([]);
      });
    });

    describe("run streams (resumable channels)", () => {
      const streams = () => {
        if (!storage.runStreams) throw new Error(`${name} keeps no run streams`);
        return storage.runStreams;
      };
      const frame = (n: number) => `data: {"n":${n}}\n\n`;
      /** A recorded run that starts a conversation at `seconds`, vouched for until `aliveSeconds`. */
      const recordedRun = async (seconds: number, aliveSeconds = seconds + LEASE_SECONDS) => {
        const c = await conversation();
        const run = c.run("hello");
        await ticketOf(storage, { ...run.begin(seconds), stream: { aliveUntil: at(aliveSeconds) } });
        return { c, run };
      };
      /** A reader follows the stream (a resume): its completion then keeps its last events. */
      const follow = (runId: string): Promise<boolean> => {
        const store = streams();
        if (!store.follow) throw new Error("this store's runStreams has no follow()");
        return store.follow(runId);
      };

      it("keeps a recorded run's chunks in order, reads after a seq, and ends the stream with the outcome's last events", async () => {
        const { c, run } = await recordedRun(1);
        expect(await streams().read(run.id, 0)).toEqual({
          stream: { runId: run.id, conversationId: c.id, startedAt: at(1), ended: false, aliveUntil: at(1 + LEASE_SECONDS), cancelRequestedAt: null },
          chunks: [],
          last: null,
        });
        await streams().append(run.id, 1, frame(1) + frame(2));
        await streams().append(run.id, 2, frame(3));
        // A write retried after it reached the database keeps the first.
        await streams().append(run.id, 2, frame(99));
        expect((await streams().read(run.id, 0))?.chunks).toEqual([
          { seq: 1, frames: frame(1) + frame(2) },
          { seq: 2, frames: frame(3) },
        ]);
        expect((await streams().read(run.id, 1))?.chunks).toEqual([{ seq: 2, frames: frame(3) }]);
        // Chunk numbers are 32-bit: reading after the largest reads the stream alone.
        expect((await streams().read(run.id, 2 ** 31 - 1))?.chunks).toEqual([]);
        expect(await streams().findLive(c.id)).toMatchObject({ runId: run.id, ended: false });
        expect(await follow(run.id)).toBe(true);

        await storage.completeRun({ ...run.complete({ ticket: 0, messages: ["done"], seconds: 2 }), streamEnd: frame(4) });
        expect(await streams().read(run.id, 2)).toMatchObject({ stream: { ended: true }, chunks: [], last: frame(4) });
        expect(await storage.findRun(run.id)).toMatchObject({ status: "success" });
        expect(await streams().findLive(c.id)).toBeNull();
        expect(await streams().read(crypto.randomUUID(), 0)).toBeNull();

        // A run that is not recorded has no stream.
        const plain = (await conversation()).run("plain");
        await ticketOf(storage, plain.begin(3));
        expect(await streams().read(plain.id, 0)).toBeNull();
        expect(await streams().findLive(plain.record.conversationId)).toBeNull();
      });

      it("keeps a stream's last events only when a reader followed it: the client that asked has them, nobody else reads them", async () => {
        const { run: unfollowed } = await recordedRun(1);
        await storage.completeRun({ ...unfollowed.complete({ ticket: 0, messages: ["done"], seconds: 2 }), streamEnd: frame(1) });
        expect(await streams().read(unfollowed.id, 0)).toMatchObject({ stream: { ended: true }, last: null });
        // Once ended, or for a run not recorded, there is nothing to follow.
        expect(await follow(unfollowed.id)).toBe(false);
        const plain = (await conversation()).run("plain");
        await ticketOf(storage, plain.begin(3));
        expect(await follow(plain.id)).toBe(false);
        expect(await follow(crypto.randomUUID())).toBe(false);

        // Followed twice (two readers): kept once.
        const { run: followed } = await recordedRun(4);
        expect([await follow(followed.id), await follow(followed.id)]).toEqual([true, true]);
        await storage.completeRun({ ...followed.complete({ ticket: 0, messages: ["done"], seconds: 5 }), streamEnd: frame(2) });
        expect(await streams().read(followed.id, 0)).toMatchObject({ stream: { ended: true }, last: frame(2) });
        expect(await storage.findRun(followed.id)).toMatchObject({ status: "success" });
      });

      it("makes a recorded run queued behind another findable from its ticket; its claim keeps the stream's lease, and an end before its turn ends it", async () => {
        const { c, run: first } = await recordedRun(0, 40);
        const second = c.run("second");
        expect((await ticketOf(storage, { ...second.begin(1, { isNew: false }), stream: { aliveUntil: at(41) } })).claimed).toBeNull();
        const third = c.run("third");
        expect((await ticketOf(storage, { ...third.begin(1, { isNew: false }), stream: { aliveUntil: at(42) } })).claimed).toBeNull();
        // The most recent run in flight: the highest ticket.
        expect(await streams().findLive(c.id)).toMatchObject({ runId: third.id, ended: false, aliveUntil: at(42) });
        expect(await storage.findRun(third.id)).toMatchObject({ status: "running" });
        expect(await streams().findLive((await conversation()).id)).toBeNull();

        // The third gives up before its turn: its stream ends with what it stored.
        expect(await follow(third.id)).toBe(true);
        await storage.completeRun({
          ...third.complete({ ticket: 2, messages: [], user: true, claimed: false, status: "cancelled", seconds: 2 }),
          streamEnd: frame(7),
        });
        expect(await streams().read(third.id, 0)).toMatchObject({ stream: { ended: true }, last: frame(7) });
        expect(await storage.findRun(third.id)).toMatchObject({ status: "cancelled", completedAt: at(2) });
        expect(await streams().findLive(c.id)).toMatchObject({ runId: second.id });

        expect(await follow(first.id)).toBe(true);
        await storage.completeRun({ ...first.complete({ ticket: 0, messages: ["done"], seconds: 3 }), streamEnd: frame(9) });
        expect(await streams().read(first.id, 0)).toMatchObject({ stream: { ended: true }, last: frame(9) });
        expect(await storage.claimTurn({ ...second.claim(1, 4), stream: { aliveUntil: at(50) } })).not.toBeNull();
        expect(await streams().read(second.id, 0)).toMatchObject({ stream: { ended: false, aliveUntil: at(41) } });
        expect(await storage.findRun(second.id)).toMatchObject({ status: "running", startedAt: at(4) });
        await storage.completeRun({ ...second.complete({ ticket: 1, messages: ["two"], seconds: 5 }), streamEnd: frame(10) });
        expect(await streams().findLive(c.id)).toBeNull();
        // The ticket of the run that gave up was skipped: the next run's turn comes at once.
        const fourth = c.run("fourth");
        expect(await ticketOf(storage, fourth.begin(6, { isNew: false }))).toMatchObject({ ticket: 3, claimed: { userMessage: { content: "fourth" } } });
      });

      it("renews live streams, reports those whose cancel was asked for, and refuses a cancel once ended", async () => {
        const { c, run: a } = await recordedRun(1);
        const second = c.run("b");
        await ticketOf(storage, { ...second.begin(2, { isNew: false }), stream: { aliveUntil: at(40) } });
        const b = second.id;
        expect(await streams().requestCancel(b, at(3))).toBe(true);
        expect(await streams().requestCancel(b, at(4))).toBe(true);
        expect(await streams().renew([a.id, b, crypto.randomUUID()], at(100))).toEqual([b]);
        expect((await streams().read(a.id, 0))?.stream.aliveUntil).toBe(at(100));
        expect((await streams().read(b, 0))?.stream).toMatchObject({ aliveUntil: at(100), cancelRequestedAt: at(3) });
        await storage.completeRun({ ...a.complete({ ticket: 0, messages: ["done"], seconds: 5 }), streamEnd: frame(1) });
        expect(await streams().requestCancel(a.id, at(5))).toBe(false);
        expect(await streams().renew([a.id], at(200))).toEqual([]);
        expect((await streams().read(a.id, 0))?.stream.aliveUntil).toBe(at(100));
        expect(await streams().renew([], at(200))).toEqual([]);
      });

      it("ends the renewed streams whose instance stopped, storing their run cancelled without last events, and prunes the chunks of ended ones", async () => {
        const { run } = await recordedRun(0, 5);
        await streams().append(run.id, 1, frame(1));
        expect(await streams().renew([run.id], at(10))).toEqual([]);
        const alive = await recordedRun(1, 1000);
        await streams().renew([alive.run.id], at(1000));
        const plain = (await conversation()).run("plain");
        await ticketOf(storage, plain.begin(0));
        // A stream never renewed (it ended, or its instance stopped, within its first moments)
        // is not the sweep's: it is ended when asked for by its run.
        const young = await recordedRun(2, 3);

        expect(await streams().endLapsed(at(5), "lost")).toEqual([]);
        const ended = await streams().endLapsed(at(11), "lost");
        expect(ended).toMatchObject([{ runId: run.id, ended: true }]);
        expect(await streams().endLapsed(at(12), "lost")).toEqual([]);
        expect(await streams().read(run.id, 0)).toMatchObject({ stream: { ended: true }, chunks: [{ seq: 1, frames: frame(1) }], last: null });
        expect(await storage.findRun(run.id)).toMatchObject({ status: "cancelled", error: "lost", completedAt: at(11) });
        expect((await streams().findLive(alive.c.id))?.runId).toBe(alive.run.id);
        // A run that is not recorded is not the sweep's.
        await expectInFlight(plain.id);
        expect(await storage.findRun(young.run.id)).toMatchObject({ status: "running" });
        expect(await streams().endLapsed(at(12), "lost", alive.run.id)).toEqual([]);
        expect(await streams().endLapsed(at(12), "lost", young.run.id)).toMatchObject([{ runId: young.run.id, ended: true }]);
        expect(await storage.findRun(young.run.id)).toMatchObject({ status: "cancelled", error: "lost", completedAt: at(12) });

        await streams().prune(at(11));
        expect((await streams().read(run.id, 0))?.chunks).toHaveLength(1);
        await streams().prune(at(12));
        expect((await streams().read(run.id, 0))?.chunks).toEqual([]);
      });

      it("lets one of two instances sweeping at once end a lapsed stream", async () => {
        const { run } = await recordedRun(1);
        await streams().renew([run.id], at(2));
        const [a, b] = await Promise.all([streams().endLapsed(at(3), "lost"), streams().endLapsed(at(3), "lost", run.id)]);
        expect(a.length + b.length).toBe(1);
        expect(await storage.findRun(run.id)).toMatchObject({ status: "cancelled" });
      });

      it("ends the stream of a run whose outcome could not be stored with its last events, storing the run error", async () => {
        const { c, run } = await recordedRun(1);
        await streams().end(run.id, frame(5), at(3), "unstored");
        expect(await streams().read(run.id, 0)).toMatchObject({ stream: { ended: true }, last: frame(5) });
        expect(await storage.findRun(run.id)).toMatchObject({ status: "error", error: "unstored", completedAt: at(3) });
        expect(await streams().findLive(c.id)).toBeNull();
        // A stream that ended keeps its end.
        await streams().end(run.id, frame(6), at(4), "again");
        expect(await streams().read(run.id, 0)).toMatchObject({ last: frame(5) });
      });

      it("ends a recorded run's stream when its lapsed turn is taken over", async () => {
        const { c, run: first } = await recordedRun(0, 1000);
        const second = c.run("second");
        await ticketOf(storage, second.begin(1, { isNew: false }));
        expect(await storage.claimTurn(second.claim(1, LEASE_SECONDS + 1))).not.toBeNull();
        expect(await streams().read(first.id, 0)).toMatchObject({ stream: { ended: true }, last: null });
        expect(await streams().findLive(c.id)).toBeNull();
      });
    });

    describe("concurrency", () => {
      it("gives 20 concurrent runs on one conversation their turns in ticket order, with contiguous turn indexes", async () => {
        const c = await conversation();
        const opening = c.run("open");
        await ticketOf(storage, opening.begin(0));
        await storage.completeRun(opening.complete({ ticket: 0, messages: ["opened"], flowState: { count: 0 }, seconds: 1 }));

        const RUNS = 20;
        const results = await Promise.all(
          Array.from({ length: RUNS }, async (_, i) => {
            const run = c.run(`u${i}`);
            const begun = await ticketOf(storage, run.begin(2, { isNew: false }));
            let claimed = begun.claimed;
            for (let attempt = 0; !claimed; attempt++) {
              if (attempt > 2000) throw new Error(`run ${i} never got its turn`);
              await new Promise((resolve) => setTimeout(resolve, 2));
              claimed = await storage.claimTurn(run.claim(begun.ticket, 3));
            }
            const count = (claimed.conversation.flowState as { count: number }).count + 1;
            const stored = await storage.completeRun(run.complete({ ticket: begun.ticket, messages: [`a${i}`, `b${i}`], flowState: { count }, seconds: 4 }));
            return { ticket: begun.ticket, user: claimed.userMessage, stored };
          }),
        );
        // Every ticket once, and every run saw the state of the run before it.
        expect(results.map((r) => r.ticket).sort((a, b) => a - b)).toEqual(Array.from({ length: RUNS }, (_, i) => i + 1));
        expect(await storage.findConversation(c.id)).toMatchObject({ flowState: { count: RUNS }, nextTurn: 2 + 3 * RUNS });
        for (const { ticket, user, stored } of results) {
          // Runs take turns by ticket: each run's user message and replies are one block.
          expect(user.turnIndex).toBe(2 + 3 * (ticket - 1));
          expect(stored.map((m) => m.turnIndex)).toEqual([user.turnIndex + 1, user.turnIndex + 2]);
        }
        const all = await storage.listRecentMessages(c.id, 1000);
        expect(all.map((m) => m.turnIndex)).toEqual(Array.from({ length: 2 + 3 * RUNS }, (_, i) => i));
        expect(new Set(all.map((m) => m.content)).size).toBe(all.length);
      });
    });

    describe("deleting conversations, finding an end user's, listing them", () => {
      const deleteConversations = (input: DeleteConversationsInput) => {
        if (!storage.deleteConversations) throw new Error(`${name} cannot delete conversations (storage.deleteConversations)`);
        return storage.deleteConversations(input);
      };
      const findEndUser = (query: EndUserQuery) => {
        if (!storage.findEndUserConversations) throw new Error(`${name} cannot find an end user's conversations (storage.findEndUserConversations)`);
        return storage.findEndUserConversations(query);
      };
      const list = (query: ConversationQuery) => {
        if (!storage.listConversations) throw new Error(`${name} cannot list conversations (storage.listConversations)`);
        return storage.listConversations(query);
      };
      const NOW = at(3600);
      const PLUGIN = "contract-delete";

      /** Everything the storage shows of a conversation through its interface. */
      async function shown(c: FilledConversation) {
        return {
          conversation: await storage.findConversation(c.id),
          messages: (await storage.listRecentMessages(c.id, 100)).length,
          runs: (await Promise.all(c.runIds.map((id) => storage.findRun(id)))).filter((run) => run !== null).length,
          streams: (await Promise.all(c.runIds.map((id) => storage.runStreams?.read(id, 0) ?? null))).filter((stream) => stream !== null).length,
        };
      }

      it("findEndedConversations finds a channel's conversations idle since before a time, never one a live chat holds open", async (test) => {
        const found = storage.findEndedConversations?.bind(storage);
        const find = async (query: Parameters<NonNullable<typeof found>>[0]) => ((await found?.(query)) ?? []).sort();
        if (!found) return test.skip("findEndedConversations is optional");
        const { channel } = await seed();
        const other = (await seed()).channel;
        /** A conversation whose one run ended at `seconds`, handed over when `mode` says so. */
        const idleSince = async (ch: ChannelRecord, seconds: number, mode?: "handover") => {
          const c = new Conversation(storage, ch);
          const run = c.run("hi");
          await ticketOf(storage, run.begin(seconds - 1));
          await storage.completeRun(
            run.complete({
              ticket: 0,
              messages: ["hello"],
              seconds,
              ...(mode ? { status: "pending" as const, mode: handover("bot", at(seconds - 1), seconds) } : {}),
            }),
          );
          return c.id;
        };
        const oldest = await idleSince(channel, 10);
        const older = await idleSince(channel, 20);
        const waiting = await idleSince(channel, 5, "handover");
        const recent = await idleSince(channel, 500);
        await idleSince(other, 10);
        const sorted = (...ids: string[]) => ids.sort();
        expect(await find({ channelId: channel.id, before: at(100), limit: 10 })).toEqual(sorted(oldest, older));
        expect(await find({ channelId: channel.id, before: at(100), limit: 1 })).toHaveLength(1);
        expect([oldest, older]).toContain((await find({ channelId: channel.id, before: at(100), limit: 1 }))[0]);
        expect(await find({ channelId: channel.id, before: at(15), limit: 10 })).toEqual([oldest]);
        expect(await find({ channelId: channel.id, before: at(1000), limit: 10 })).toEqual(sorted(oldest, older, recent));
        expect(await storage.findConversation(waiting)).toMatchObject({ mode: "livechat_waiting" });
        // The live chat ends: the conversation ended when its mode changed, not before.
        const closed: ModeChange = { from: "livechat_waiting", since: at(5), to: "livechat_closed", at: at(600) };
        expect(await storage.updateLiveChat({ conversationId: waiting, change: closed, messages: [] })).not.toBeNull();
        expect(await find({ channelId: channel.id, before: at(550), limit: 10 })).toEqual(sorted(oldest, older, recent));
        expect(await find({ channelId: channel.id, before: at(1000), limit: 10 })).toContain(waiting);
      });

      it("deletes a conversation with its messages, runs, streams, live chat and plugin values, in one call that records its audit event; another is untouched", async () => {
        const { tenant, channel } = await seed();
        const doomed = await fillConversation(storage, channel, { externalUserId: "user-1", pluginId: PLUGIN });
        const kept = await fillConversation(storage, channel, { externalUserId: "user-2", pluginId: PLUGIN });
        expect(await shown(doomed)).toMatchObject({ messages: 5, runs: 2, streams: 1 });

        const audit = (deleted: DeletedConversation[]): AuditEventRecord => ({
          id: crypto.randomUUID(),
          timestamp: NOW,
          tenantId: tenant.id,
          channelId: channel.id,
          actor: "contract",
          via: "service",
          operation: "conversation.delete",
          changes: { conversation_id: { from: deleted[0]?.id, to: null }, messages: { from: deleted[0]?.messages, to: 0 } },
          outcome: "success",
          errorCode: null,
        });
        const result = await deleteConversations({ conversationIds: [doomed.id], tenantId: tenant.id, now: NOW, audit });
        expect(result).toEqual({ busy: [], deleted: [{ id: doomed.id, tenantId: tenant.id, channelId: channel.id, messages: 5, runs: 2 }] });
        expect(await shown(doomed)).toEqual({ conversation: null, messages: 0, runs: 0, streams: 0 });
        expect(await storage.pluginStore(PLUGIN).get(`${channel.id}:thread-of:${doomed.id}`)).toBeUndefined();
        const [event] = await storage.listAuditEvents({ tenantId: tenant.id, limit: 10 });
        expect(event).toMatchObject({
          operation: "conversation.delete",
          changes: { conversation_id: { from: doomed.id, to: null }, messages: { from: 5, to: 0 } },
        });

        // Its idempotency record went with it: its key is free again; the other's still answers.
        if (storage.idempotency && doomed.idempotencyKey !== null && kept.idempotencyKey !== null) {
          const claim = (key: string) => ({
            channelId: channel.id,
            key,
            requestHash: "c".repeat(64),
            token: crypto.randomUUID(),
            now: NOW,
            expiresAt: at(7200),
            lockedUntil: at(3600 + LEASE_SECONDS),
          });
          expect(await storage.idempotency.claim(claim(kept.idempotencyKey))).toMatchObject({
            state: "done",
            response: { body: expect.stringContaining(kept.id) },
          });
          expect(await storage.idempotency.claim(claim(doomed.idempotencyKey))).toBeNull();
        }

        // The other conversation of the channel is whole.
        expect(await shown(kept)).toMatchObject({ conversation: { id: kept.id, mode: "livechat_active" }, messages: 5, runs: 2, streams: 1 });
        expect(await storage.pluginStore(PLUGIN).get(`${channel.id}:thread-of:${kept.id}`)).toBe(`thread-${kept.id}`);

        // Deleted once: again, it is not there.
        expect(await deleteConversations({ conversationIds: [doomed.id], now: NOW })).toEqual({ deleted: [], busy: [] });
      });

      it("leaves another tenant's conversation alone, and an unknown id is not deleted", async () => {
        const { channel } = await seed();
        const other = await seed();
        const c = await fillConversation(storage, channel);
        expect(await deleteConversations({ conversationIds: [c.id, crypto.randomUUID()], tenantId: other.tenant.id, now: NOW })).toEqual({
          deleted: [],
          busy: [],
        });
        expect(await shown(c)).toMatchObject({ conversation: { id: c.id }, messages: 5, runs: 2 });
        expect(await deleteConversations({ conversationIds: [], now: NOW })).toEqual({ deleted: [], busy: [] });
      });

      it("refuses a conversation with a run in flight, deleting nothing of it or of the others asked; once its lease lapsed, deletes it", async () => {
        const { channel } = await seed();
        const idle = await fillConversation(storage, channel);
        const c = new Conversation(storage, channel);
        const run = c.run("in flight");
        await ticketOf(storage, run.begin(10));
        const result = await deleteConversations({ conversationIds: [idle.id, c.id], now: at(20) });
        expect(result).toEqual({ deleted: [], busy: [c.id] });
        expect(await storage.findConversation(c.id)).not.toBeNull();
        expect(await shown(idle)).toMatchObject({ messages: 5, runs: 2 });
        // The run's instance stopped: its lease lapsed, nothing is in flight any more.
        expect((await deleteConversations({ conversationIds: [c.id], now: at(10 + LEASE_SECONDS + 1) })).deleted).toMatchObject([{ id: c.id, messages: 1 }]);
        expect(await storage.findConversation(c.id)).toBeNull();
        expect(await storage.listRecentMessages(c.id, 10)).toEqual([]);
      });

      it("finds the conversations whose messages name an end user, exactly, within a tenant", async () => {
        const { tenant, channel } = await seed();
        const second = channelRecord(tenant.id);
        await storage.createChannel(second, keyRecord(second, `hash-${crypto.randomUUID()}`));
        const user = `user_%${crypto.randomUUID()}`;
        const a = await fillConversation(storage, channel, { externalUserId: user, seconds: 1 });
        const b = await fillConversation(storage, second, { externalUserId: user, seconds: 2 });
        await fillConversation(storage, channel, { externalUserId: `${user}0` });
        await fillConversation(storage, channel, { externalUserId: user.replace("_%", "xx") });
        await fillConversation(storage, channel);
        expect((await findEndUser({ externalUserId: user, tenantId: tenant.id })).sort()).toEqual([a.id, b.id].sort());
        expect((await findEndUser({ externalUserId: user })).sort()).toEqual([a.id, b.id].sort());
        expect(await findEndUser({ externalUserId: user, tenantId: crypto.randomUUID() })).toEqual([]);
        expect(await findEndUser({ externalUserId: "nobody" })).toEqual([]);
      });

      it("lists conversations newest first, by tenant, channel, period and ids, a page at a time", async () => {
        const { tenant, channel } = await seed();
        const second = channelRecord(tenant.id);
        await storage.createChannel(second, keyRecord(second, `hash-${crypto.randomUUID()}`));
        const c1 = await fillConversation(storage, channel, { seconds: 100 });
        const c2 = await fillConversation(storage, channel, { seconds: 200 });
        const c3 = await fillConversation(storage, second, { seconds: 300 });
        const ids = (records: { id: string }[]) => records.map((record) => record.id);
        expect(ids(await list({ tenantId: tenant.id, limit: 10 }))).toEqual([c3.id, c2.id, c1.id]);
        expect(ids(await list({ tenantId: tenant.id, channelId: channel.id, limit: 10 }))).toEqual([c2.id, c1.id]);
        expect(ids(await list({ tenantId: tenant.id, since: at(150), until: at(300), limit: 10 }))).toEqual([c2.id]);
        expect(ids(await list({ tenantId: tenant.id, ids: [c1.id, c3.id], limit: 10 }))).toEqual([c3.id, c1.id]);
        expect(await list({ tenantId: tenant.id, ids: [], limit: 10 })).toEqual([]);
        const [first] = await list({ tenantId: tenant.id, limit: 1 });
        expect(first).toMatchObject({ id: c3.id, channelId: second.id, tenantId: tenant.id, mode: "livechat_active" });
        const next = await list({ tenantId: tenant.id, limit: 10, before: { createdAt: (first as { createdAt: string }).createdAt, id: c3.id } });
        expect(ids(next)).toEqual([c2.id, c1.id]);
        expect(await list({ tenantId: crypto.randomUUID(), limit: 10 })).toEqual([]);
      });
    });

    describe("listing tenants and channels", () => {
      it("lists every tenant as stored, oldest first (by creation time, then id)", async () => {
        const ids = [crypto.randomUUID(), crypto.randomUUID()].sort();
        const made = [
          { id: crypto.randomUUID(), name: "Late", createdAt: at(30) },
          { id: ids[1] as string, name: "Tied B", createdAt: at(20) },
          { id: crypto.randomUUID(), name: "Early", createdAt: at(10) },
          { id: ids[0] as string, name: "Tied A", createdAt: at(20) },
        ];
        for (const tenant of made) await storage.createTenant(tenant);
        const listed = await storage.listTenants();
        expect(listed).toHaveLength(await storage.countTenants());
        const mine = listed.filter((tenant) => made.some((m) => m.id === tenant.id));
        expect(mine.map((tenant) => tenant.name)).toEqual(["Early", "Tied A", "Tied B", "Late"]);
        expect(mine[0]).toEqual(made[2]);
        // Every tenant listed is in order, those of other tests included.
        const order = listed.map((tenant) => `${tenant.createdAt} ${tenant.id}`);
        expect(order).toEqual([...order].sort());
      });

      it("lists a tenant's channels as findChannel reads them, archived ones included, oldest first; every tenant's without a tenant", async () => {
        const { tenant, channel: first } = await seed({ createdAt: at(5), updatedAt: at(5), clientId: `client-${crypto.randomUUID()}`, type: "webhook" });
        const second = channelRecord(tenant.id, { createdAt: at(1), updatedAt: at(1), name: "Older" });
        await storage.createChannel(second, keyRecord(second, `hash-${crypto.randomUUID()}`));
        await storage.updateChannel(first.id, { state: "archived" }, at(6));
        const other = await seed();

        const listed = await storage.listChannels({ tenantId: tenant.id });
        expect(listed.map((channel) => channel.id)).toEqual([second.id, first.id]);
        expect(listed[0]).toEqual(await storage.findChannel(second.id));
        expect(listed[1]).toEqual(await storage.findChannel(first.id));
        expect(listed[1]).toMatchObject({ state: "archived", type: "webhook", clientId: first.clientId });

        expect(await storage.listChannels({ tenantId: crypto.randomUUID() })).toEqual([]);
        const all = await storage.listChannels();
        const ids = all.map((channel) => channel.id);
        expect(ids).toEqual(expect.arrayContaining([first.id, second.id, other.channel.id]));
        const order = all.map((channel) => `${channel.createdAt} ${channel.id}`);
        expect(order).toEqual([...order].sort());
        expect(await storage.listChannels({})).toEqual(all);
      });
    });

    describe("idempotency keys", () => {
      const keys = (): IdempotencyStore => {
        if (!storage.idempotency) throw new Error("this storage keeps no idempotency keys (storage.idempotency)");
        return storage.idempotency;
      };
      const HASH = "a".repeat(64);
      const OTHER_HASH = "b".repeat(64);
      const DAY = 86_400;
      const json = (body: string): IdempotentResponse => ({ status: 200, kind: "json", body });
      /** A claim of `key` at `seconds`, holding it for a lease of `lease` seconds, for a day. */
      const claimAt = (channelId: string, key: string, seconds: number, options: { hash?: string; token?: string; lease?: number } = {}): IdempotencyClaim => ({
        channelId,
        key,
        requestHash: options.hash ?? HASH,
        token: options.token ?? crypto.randomUUID(),
        now: at(seconds),
        expiresAt: at(seconds + DAY),
        lockedUntil: at(seconds + (options.lease ?? LEASE_SECONDS)),
      });

      it("claims a new key once: another claim reads it running, with its hash, its holder and its times; never the body", async () => {
        const channelId = crypto.randomUUID();
        const first = claimAt(channelId, "order-1", 0);
        expect(await keys().claim(first)).toBeNull();
        for (const hash of [HASH, OTHER_HASH]) {
          expect(await keys().claim(claimAt(channelId, "order-1", 1, { hash }))).toEqual({
            channelId,
            key: "order-1",
            requestHash: HASH,
            token: first.token,
            state: "running",
            createdAt: at(0),
            expiresAt: at(DAY),
            lockedUntil: at(LEASE_SECONDS),
            response: null,
          });
        }
      });

      it("stores the answer of the request holding the key: a claim then reads it done, with its answer as stored; only the holder completes", async () => {
        const channelId = crypto.randomUUID();
        const first = claimAt(channelId, "k", 0);
        await keys().claim(first);
        expect(await keys().complete(channelId, "k", crypto.randomUUID(), json("{}"))).toBe(false);
        const frames = `data: ${JSON.stringify({ type: "text-delta", id: "1", delta: "Grüße 😀 ".repeat(5000) })}\n\n`;
        const stream: IdempotentResponse = { status: 200, kind: "stream", body: frames };
        expect(await keys().complete(channelId, "k", first.token, stream)).toBe(true);
        expect(await keys().complete(channelId, "k", first.token, json("{}"))).toBe(false);
        // Done: read back as stored, even once its holder's lease would have lapsed.
        const read = await keys().claim(claimAt(channelId, "k", LEASE_SECONDS * 10));
        expect(read).toMatchObject({ state: "done", token: first.token, requestHash: HASH, response: stream });
        expect(read?.response?.body).toBe(frames);
        // Nor renewed nor released once done.
        expect(await keys().renew(channelId, "k", first.token, at(100))).toBe(false);
        await keys().release(channelId, "k", first.token);
        expect(await keys().claim(claimAt(channelId, "k", 2))).toMatchObject({ state: "done", response: stream });
      });

      it("scopes a key to its channel", async () => {
        const [a, b] = [crypto.randomUUID(), crypto.randomUUID()];
        const onA = claimAt(a, "same", 0);
        expect(await keys().claim(onA)).toBeNull();
        expect(await keys().claim(claimAt(b, "same", 0))).toBeNull();
        await keys().complete(a, "same", onA.token, json('{"a":1}'));
        expect(await keys().claim(claimAt(b, "same", 1))).toMatchObject({ state: "running", response: null });
        expect(await keys().claim(claimAt(a, "same", 1))).toMatchObject({ state: "done", response: json('{"a":1}') });
      });

      it("renews the lease of its holder only; a lapsed lease is taken over by the same body, never by another, and the old holder can no longer renew, complete or release", async () => {
        const channelId = crypto.randomUUID();
        const first = claimAt(channelId, "k", 0);
        await keys().claim(first);
        expect(await keys().renew(channelId, "k", crypto.randomUUID(), at(60))).toBe(false);
        expect(await keys().renew(channelId, "k", first.token, at(60))).toBe(true);
        // Within the renewed lease: in use.
        expect(await keys().claim(claimAt(channelId, "k", 45))).toMatchObject({ token: first.token, lockedUntil: at(60) });
        // Lapsed: another body still finds it (and is refused by the service); the same body takes it over.
        expect(await keys().claim(claimAt(channelId, "k", 61, { hash: OTHER_HASH }))).toMatchObject({ token: first.token, state: "running" });
        const second = claimAt(channelId, "k", 61);
        expect(await keys().claim(second)).toBeNull();
        expect(await keys().claim(claimAt(channelId, "k", 62))).toMatchObject({ token: second.token, createdAt: at(61), lockedUntil: at(61 + LEASE_SECONDS) });
        expect(await keys().renew(channelId, "k", first.token, at(200))).toBe(false);
        expect(await keys().complete(channelId, "k", first.token, json("{}"))).toBe(false);
        await keys().release(channelId, "k", first.token);
        expect(await keys().claim(claimAt(channelId, "k", 63))).toMatchObject({ token: second.token, state: "running" });
      });

      it("an expired key is free again, whatever the body; one held by a request still running is not", async () => {
        const channelId = crypto.randomUUID();
        const done = claimAt(channelId, "answered", 0);
        await keys().claim(done);
        await keys().complete(channelId, "answered", done.token, json("{}"));
        expect(await keys().claim(claimAt(channelId, "answered", DAY - 1, { hash: OTHER_HASH }))).toMatchObject({ state: "done" });
        const again = claimAt(channelId, "answered", DAY, { hash: OTHER_HASH });
        expect(await keys().claim(again)).toBeNull();
        expect(await keys().claim(claimAt(channelId, "answered", DAY + 1))).toMatchObject({ token: again.token, requestHash: OTHER_HASH, response: null });

        // A run of more than a day, still renewed: its key stays its own.
        const long = claimAt(channelId, "long", 0);
        await keys().claim(long);
        await keys().renew(channelId, "long", long.token, at(DAY + 60));
        expect(await keys().claim(claimAt(channelId, "long", DAY + 1, { hash: OTHER_HASH }))).toMatchObject({ token: long.token });
        expect(await keys().claim(claimAt(channelId, "long", DAY + 61, { hash: OTHER_HASH }))).toBeNull();
      });

      it("release frees a key held without an answer, by its holder only", async () => {
        const channelId = crypto.randomUUID();
        const first = claimAt(channelId, "k", 0);
        await keys().claim(first);
        await keys().release(channelId, "k", crypto.randomUUID());
        expect(await keys().claim(claimAt(channelId, "k", 1, { hash: OTHER_HASH }))).toMatchObject({ token: first.token });
        await keys().release(channelId, "k", first.token);
        expect(await keys().claim(claimAt(channelId, "k", 2, { hash: OTHER_HASH }))).toBeNull();
      });

      it("prune deletes the keys that expired, not one within its day nor one still held", async () => {
        const channelId = crypto.randomUUID();
        const old = claimAt(channelId, "old", 0);
        const recent = claimAt(channelId, "recent", 100);
        const held = claimAt(channelId, "held", 0);
        for (const claim of [old, recent, held]) await keys().claim(claim);
        await keys().complete(channelId, "old", old.token, json('"old"'));
        await keys().complete(channelId, "recent", recent.token, json('"recent"'));
        await keys().renew(channelId, "held", held.token, at(DAY + 600));
        await keys().prune(at(DAY + 50));
        // Read as of before they expired: the deleted key is a new one, the others are as they were.
        expect(await keys().claim(claimAt(channelId, "old", 1, { hash: OTHER_HASH }))).toBeNull();
        expect(await keys().claim(claimAt(channelId, "recent", 101, { hash: OTHER_HASH }))).toMatchObject({ response: json('"recent"') });
        expect(await keys().claim(claimAt(channelId, "held", 1, { hash: OTHER_HASH }))).toMatchObject({ token: held.token });
      });

      it("of 20 claims of one key at once, one claims it and the others read its record", async () => {
        const channelId = crypto.randomUUID();
        const claims = Array.from({ length: 20 }, () => claimAt(channelId, "race", 0));
        const results = await Promise.all(claims.map((claim) => keys().claim(claim)));
        const winners = claims.filter((_, i) => results[i] === null);
        expect(winners).toHaveLength(1);
        for (const result of results) if (result !== null) expect(result.token).toBe(winners[0]?.token);
      });
    });

    pluginStoreGroup(() => storage);
  });
}

/**
 * Declares the behaviour of {@link Storage.pluginStore} alone (the "plugin store" group of
 * {@link storageContract}), for a store that does not run the whole contract: `open` as there.
 *
 * @example
 * pluginStoreContract("D1", async () => d1(binding));
 */
export function pluginStoreContract(name: string, open: () => Promise<StorageUnderTest>): void {
  describe(`Plugin store contract: ${name}`, () => {
    let opened: StorageUnderTest | undefined;
    let storage: Storage;
    // A store reached through a proxy (D1 in miniflare) migrates one statement at a time.
    beforeAll(async () => {
      opened = await open();
      storage = "dispose" in opened ? opened.storage : opened;
      await storage.migrate();
    }, 120_000);
    afterAll(async () => {
      if (!opened) return;
      await storage.close();
      if ("dispose" in opened) await opened.dispose();
    });
    pluginStoreGroup(() => storage);
  });
}

/** Waits until this process's clock is past `ms` from now: what a value or lease of that ttl, set now, needs to expire. */
async function pastTtl(ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() <= until) await new Promise((resolve) => setTimeout(resolve, Math.max(1, until + 1 - Date.now())));
}

/** How long a value or lease that must not expire during a test lives, in ms. */
const LONG_MS = 600_000;
/** How long one that a test waits out lives, in ms. */
const SHORT_MS = 25;

/** The "plugin store" group: values, ttls, add once, namespacing and leases, on the storage `current()` gives. */
function pluginStoreGroup(current: () => Storage): void {
  describe("plugin store", () => {
    /** The store of a new plugin id: tests never see each other's keys. */
    const fresh = (): PluginStore => current().pluginStore(`test-${crypto.randomUUID()}`);

    it("reads back what set stored, as JSON and as a copy; set replaces; an absent key is undefined", async () => {
      const store = fresh();
      expect(await store.get("nothing")).toBeUndefined();
      const value = { text: "Grüße 😀 \u0000 ok", list: [1, 2.5, -3], nested: { yes: true, no: false, none: null } };
      await store.set("object", value);
      value.list.push(4);
      const read = await store.get<typeof value>("object");
      expect(read).toEqual({ text: "Grüße 😀 \u0000 ok", list: [1, 2.5, -3], nested: { yes: true, no: false, none: null } });
      read?.list.push(5);
      expect((await store.get<typeof value>("object"))?.list).toEqual([1, 2.5, -3]);
      for (const [key, scalar] of [
        ["zero", 0],
        ["false", false],
        ["null", null],
        ["empty", ""],
        ["array", []],
      ] as const) {
        await store.set(key, scalar);
        expect(await store.get(key)).toEqual(scalar);
      }
      // JSON's own conversions: a date is its ISO text, an undefined property is left out.
      await store.set("json", { at: new Date(T0), gone: undefined });
      expect(await store.get("json")).toEqual({ at: new Date(T0).toISOString() });
      await store.set("object", "replaced");
      expect(await store.get("object")).toBe("replaced");
      // Any string is a key, an empty one or a long one included.
      const long = "k".repeat(2000);
      await store.set("", "empty key");
      await store.set(long, "long key");
      expect([await store.get(""), await store.get(long)]).toEqual(["empty key", "long key"]);
    });

    it("a value with a ttl reads as absent once it expired; one without is kept; set replaces the ttl", async () => {
      const store = fresh();
      await store.set("long", 1, { ttlMs: LONG_MS });
      await store.set("short", 2, { ttlMs: SHORT_MS });
      await store.set("kept", 3, { ttlMs: SHORT_MS });
      await store.set("kept", 4);
      await store.set("shortened", 5);
      await store.set("shortened", 6, { ttlMs: SHORT_MS });
      await pastTtl(SHORT_MS);
      expect(await store.get("long")).toBe(1);
      expect(await store.get("short")).toBeUndefined();
      expect(await store.get("kept")).toBe(4);
      expect(await store.get("shortened")).toBeUndefined();
      // Read as absent again (deleted when first met, or not), and not there to delete.
      expect(await store.get("short")).toBeUndefined();
      expect(await store.delete("shortened")).toBe(false);
      await store.set("short", 7);
      expect(await store.get("short")).toBe(7);
    });

    it("add sets a key only when it is absent or expired, and says whether it did", async () => {
      const store = fresh();
      expect(await store.add("delivery-1", { by: "first" })).toBe(true);
      expect(await store.add("delivery-1", { by: "second" })).toBe(false);
      expect(await store.add("delivery-1", { by: "third" }, { ttlMs: LONG_MS })).toBe(false);
      expect(await store.get("delivery-1")).toEqual({ by: "first" });
      await store.set("delivery-2", "set", { ttlMs: LONG_MS });
      expect(await store.add("delivery-2", "added")).toBe(false);
      expect(await store.get("delivery-2")).toBe("set");
      // Expired: added again, with the new ttl (none: for ever).
      expect(await store.add("expiring", "old", { ttlMs: SHORT_MS })).toBe(true);
      await pastTtl(SHORT_MS);
      expect(await store.add("expiring", "new")).toBe(true);
      expect(await store.add("expiring", "newer")).toBe(false);
      expect(await store.get("expiring")).toBe("new");
      // Deleted: added again.
      expect(await store.delete("delivery-1")).toBe(true);
      expect(await store.add("delivery-1", { by: "fourth" })).toBe(true);
      expect(await store.get("delivery-1")).toEqual({ by: "fourth" });
    });

    it("of 20 adds of one key at once, exactly one wins, and its value is the one stored", async () => {
      const store = fresh();
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.add("race", i)));
      const winners = results.flatMap((won, i) => (won ? [i] : []));
      expect(winners).toHaveLength(1);
      expect(await store.get("race")).toBe(winners[0]);
    });

    it("delete removes a key and says whether it was there", async () => {
      const store = fresh();
      expect(await store.delete("k")).toBe(false);
      await store.set("k", "v");
      await store.set("other", "w");
      expect(await store.delete("k")).toBe(true);
      expect(await store.get("k")).toBeUndefined();
      expect(await store.delete("k")).toBe(false);
      expect(await store.get("other")).toBe("w");
    });

    it("namespaces keys and leases by plugin id: two plugins never see each other's; one id is one store", async () => {
      const id = `test-${crypto.randomUUID()}`;
      const [a, b] = [current().pluginStore(id), current().pluginStore(`${id}-other`)];
      await a.set("same", "a's");
      expect(await b.get("same")).toBeUndefined();
      expect(await b.add("same", "b's")).toBe(true);
      expect([await a.get("same"), await b.get("same")]).toEqual(["a's", "b's"]);
      expect(await a.delete("same")).toBe(true);
      expect(await b.get("same")).toBe("b's");
      expect(await a.acquireLease("leader", "holder-a", LONG_MS)).toBe(true);
      expect(await b.acquireLease("leader", "holder-b", LONG_MS)).toBe(true);
      expect(await b.releaseLease("leader", "holder-a")).toBe(false);
      // The store of the same id, asked again, is the same data.
      const again = current().pluginStore(id);
      await again.set("shared", 1);
      expect(await a.get("shared")).toBe(1);
      expect(await again.acquireLease("leader", "holder-b", LONG_MS)).toBe(false);
      expect(await again.releaseLease("leader", "holder-a")).toBe(true);
    });

    it("a lease has one holder: taken when free, renewed by its holder, refused to another until released or lapsed", async () => {
      const store = fresh();
      expect(await store.acquireLease("leader", "a", LONG_MS)).toBe(true);
      expect(await store.acquireLease("leader", "b", LONG_MS)).toBe(false);
      // The same holder renews it (here for a short time).
      expect(await store.acquireLease("leader", "a", LONG_MS)).toBe(true);
      expect(await store.releaseLease("leader", "b")).toBe(false);
      expect(await store.acquireLease("leader", "b", LONG_MS)).toBe(false);
      expect(await store.acquireLease("leader", "a", SHORT_MS)).toBe(true);
      await pastTtl(SHORT_MS);
      // Lapsed: taken by another; its old holder is refused and releases nothing.
      expect(await store.acquireLease("leader", "b", LONG_MS)).toBe(true);
      expect(await store.acquireLease("leader", "a", LONG_MS)).toBe(false);
      expect(await store.releaseLease("leader", "a")).toBe(false);
      expect(await store.acquireLease("leader", "a", LONG_MS)).toBe(false);
      // Released: free for anyone, once.
      expect(await store.releaseLease("leader", "b")).toBe(true);
      expect(await store.releaseLease("leader", "b")).toBe(false);
      expect(await store.acquireLease("leader", "a", LONG_MS)).toBe(true);
      // Leases and values do not mix, and two leases are two.
      expect(await store.get("leader")).toBeUndefined();
      expect(await store.acquireLease("other", "b", LONG_MS)).toBe(true);
      // A lease that lapsed with no one taking it is no longer held: its release says so.
      expect(await store.acquireLease("lapsing", "a", SHORT_MS)).toBe(true);
      await pastTtl(SHORT_MS);
      expect(await store.releaseLease("lapsing", "a")).toBe(false);
      expect(await store.acquireLease("lapsing", "b", LONG_MS)).toBe(true);
    });

    it("of 20 holders acquiring one lease at once, exactly one holds it", async () => {
      const store = fresh();
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.acquireLease("race", `holder-${i}`, LONG_MS)));
      const holders = results.flatMap((held, i) => (held ? [`holder-${i}`] : []));
      expect(holders).toHaveLength(1);
      expect(await store.acquireLease("race", holders[0] as string, LONG_MS)).toBe(true);
      expect(await store.acquireLease("race", "late", LONG_MS)).toBe(false);
    });

    it("refuses what no store keeps: a value JSON has no text for, a ttl that is not a positive number, U+0000 in a key", async () => {
      const store = fresh();
      await expect(store.set("k", undefined)).rejects.toThrow(TypeError);
      await expect(store.add("k", () => 1)).rejects.toThrow(TypeError);
      await expect(store.set("k", { n: 1n })).rejects.toThrow(TypeError);
      for (const ttlMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
        await expect(store.set("k", 1, { ttlMs })).rejects.toThrow(TypeError);
        await expect(store.acquireLease("lease", "a", ttlMs)).rejects.toThrow(TypeError);
      }
      await expect(store.set("a\u0000b", 1)).rejects.toThrow(TypeError);
      await expect(store.acquireLease("lease", "a\u0000b", LONG_MS)).rejects.toThrow(TypeError);
      // Nothing was stored or taken by the refused calls.
      expect(await store.get("k")).toBeUndefined();
      expect(await store.acquireLease("lease", "a", LONG_MS)).toBe(true);
      expect(() => current().pluginStore("")).toThrow(TypeError);
    });
  });
}

/** A run on a {@link Conversation}: what it begins, claims and completes with. */
interface TestRun {
  id: string;
  name: string;
  userMessage: NewMessage;
  record: RunRecord;
  begin(seconds: number, options?: { isNew?: boolean }): BeginRunInput;
  claim(ticket: number, seconds: number, options?: { claimUntil?: number }): ClaimTurnInput;
  complete(options: CompleteOptions): CompleteRunInput;
}

interface CompleteOptions {
  ticket: number;
  /** Assistant messages to store (the user message too when `user`). */
  messages: string[];
  /** Completion time, in seconds after the epoch. */
  seconds: number;
  claimed?: boolean;
  status?: RunStatus;
  user?: boolean;
  flowState?: unknown;
  mode?: ModeChange;
  liveChatUserTurn?: number;
}

class Conversation {
  readonly id = crypto.randomUUID();
  started = false;
  constructor(
    readonly storage: Storage,
    readonly channel: ChannelRecord,
  ) {}

  run(name: string): TestRun {
    const { channel } = this;
    const conversationId = this.id;
    const id = crypto.randomUUID();
    const userMessage = newMessage(name, "user", id);
    const conversation = { id: conversationId, tenantId: channel.tenantId, channelId: channel.id };
    let startedAt = at(0);
    const record = (): RunRecord => ({
      id: run.id,
      conversationId,
      channelId: channel.id,
      tenantId: channel.tenantId,
      status: "running",
      flowName: "echo",
      flowVersion: "1",
      result: null,
      error: null,
      executionOrder: [],
      startedAt,
      completedAt: startedAt,
      durationMs: 0,
    });
    const run: TestRun = {
      id,
      name,
      userMessage,
      get record() {
        return record();
      },
      begin(seconds, options = {}) {
        startedAt = at(seconds);
        return {
          conversation: { ...conversation, isNew: options.isNew ?? true },
          run: record(),
          userMessage: structuredClone(userMessage),
          now: at(seconds),
          leaseUntil: at(seconds + LEASE_SECONDS),
        };
      },
      claim(ticket, seconds, options = {}) {
        return { ...run.begin(seconds, { isNew: false }), ticket, claimUntil: at(options.claimUntil ?? seconds + LEASE_SECONDS) };
      },
      complete(options) {
        const claimed = options.claimed ?? true;
        const status = options.status ?? "success";
        const completedAt = at(options.seconds);
        const messages = options.messages.map((content) => newMessage(content, "assistant", run.id));
        if (options.user) messages.unshift(structuredClone(userMessage));
        const input: CompleteRunInput = {
          run: {
            ...record(),
            ...(claimed ? {} : { startedAt: completedAt }),
            status,
            result: status === "success" ? { ok: true } : null,
            executionOrder: status === "success" ? ["echo"] : [],
            completedAt,
            durationMs: claimed ? Date.parse(completedAt) - Date.parse(startedAt) : 0,
          },
          conversation: { ...conversation, isNew: false },
          ticket: options.ticket,
          claimed,
          messages,
          claimUntil: at(options.seconds + LEASE_SECONDS),
        };
        if ("flowState" in options) input.flowState = options.flowState;
        if (options.mode !== undefined) input.mode = options.mode;
        if (options.liveChatUserTurn !== undefined) input.liveChatUserTurn = options.liveChatUserTurn;
        return input;
      },
    };
    return run;
  }
}

/** A run's handover from `from` (entered at `since`), at `seconds`. */
function handover(from: ConversationMode, since: string, seconds: number): ModeChange {
  return { from, since, to: "livechat_waiting", at: at(seconds), livechatConversationId: `lc-${seconds}` };
}

function channelRecord(tenantId: string, overrides: Partial<ChannelRecord> = {}): ChannelRecord {
  return {
    id: crypto.randomUUID(),
    tenantId,
    name: "Test channel",
    type: "api",
    mode: "server",
    environment: "prod",
    state: "active",
    flowName: "echo",
    allowedOrigins: ["https://app.example.com"],
    defaultStream: true,
    requireSignature: false,
    signingSecretEncrypted: null,
    apiKeyHint: "svc_live_****aaaa",
    clientId: null,
    languages: ["en_US", "fr_FR"],
    livechatMessages: { livechat_waiting: "Please wait" },
    livechatWaitTimeoutSeconds: null,
    runTimeoutSeconds: null,
    rateLimits: null,
    resumableStreams: false,
    widget: { theme: { position: "bottom-left" } },
    settings: {},
    sealedSettings: null,
    createdAt: at(0),
    updatedAt: at(0),
    ...overrides,
  };
}

function keyRecord(channel: ChannelRecord, hash: string, hint = `svc_live_****${hash.slice(-4)}`): ApiKeyRecord {
  return {
    id: crypto.randomUUID(),
    channelId: channel.id,
    tenantId: channel.tenantId,
    hash,
    prefix: "svc_live_",
    environment: channel.environment,
    hint,
    createdAt: at(0),
    expiresAt: null,
    revokedAt: null,
  };
}

function newMessage(content: string, role: NewMessage["role"], runId: string | null): NewMessage {
  return {
    origin: "agent",
    role,
    content,
    timestamp: at(0),
    tokenCount: Math.ceil(content.length / 4),
    runId,
    stepId: role === "user" ? null : crypto.randomUUID(),
    nodeType: role === "user" ? null : "echo",
    toolCalls: null,
    toolCallId: null,
    livechatMessageId: null,
    sender: null,
    metadata: null,
  };
}

/** Runs `change`; a record that is frozen refuses it (a `TypeError` in strict code), which is as good. */
function changeUnlessFrozen(change: () => unknown): void {
  try {
    change();
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
  }
}

/** The tool calls of `message`, which must have some: a test changes them to show they are a copy. */
function toolCallsOf(message: Pick<NewMessage, "toolCalls"> | undefined): unknown[] {
  if (!message?.toolCalls) throw new Error("expected a message with tool calls");
  return message.toolCalls;
}

/** The ticket of a run that must get one (`beginRun` answers null only for a conversation that is not the run's). */
async function ticketOf(storage: Pick<Storage, "beginRun">, input: BeginRunInput): Promise<RunTicket> {
  const ticket = await storage.beginRun(input);
  if (ticket === null) throw new Error(`beginRun: conversation ${input.conversation.id} is not the run's`);
  return ticket;
}
