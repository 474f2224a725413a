import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createChannelService, defineFlow, type Logger, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { migrations } from "./migrations.js";
import { postgres } from "./postgres.js";
import { sqlite } from "./sqlite.js";
import type { KyselyStorage } from "./storage.js";

/** A logger that keeps what it is told. */
function recorder(): Logger & { warnings: string[]; errors: string[] } {
  const warnings: string[] = [];
  const errors: string[] = [];
  return {
    warnings,
    errors,
    warn: (...args: unknown[]) => void warnings.push(args.map(String).join(" ")),
    error: (...args: unknown[]) => void errors.push(args.map(String).join(" ")),
  };
}

const KEY_A = "a".repeat(64);
const KEY_B = "b".repeat(64);
const LAST = Object.keys(migrations).at(-1) as string;

/** What each database gives the tests: a new empty database, and how to drop it. */
type Open = () => Promise<{ storage: () => KyselyStorage; dispose: () => Promise<void> }>;

const openSqlite: Open = async () => {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-startup-"));
  return { storage: () => sqlite(join(dir, "startup.db")), dispose: () => rm(dir, { recursive: true, force: true }) };
};

function startupChecks(name: string, open: Open) {
  describe(`${name}: createChannelService checks the database at start-up`, () => {
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });
    /** A new database; each storage opened on it is closed after the test. */
    async function database() {
      const db = await open();
      cleanups.push(db.dispose);
      return () => {
        const storage = db.storage();
        cleanups.push(() => storage.close().catch(() => undefined));
        return storage;
      };
    }

    it("refuses a database never migrated, saying how to migrate, instead of answering 500 (no such table: api_keys) to every request", async () => {
      const storage = (await database())();
      const status = await storage.schemaStatus();
      expect(status).toEqual({ known: Object.keys(migrations), pending: Object.keys(migrations), unknown: [] });
      const started = createChannelService({ storage, flows: demoFlows, secretKey: KEY_A, logger: recorder() });
      await expect(started).rejects.toThrow(/no channelkit schema/);
      await expect(started).rejects.toThrow("await storage.migrate()");
      await expect(started).rejects.toThrow("channelkit migrate");
      // Asking changed nothing: the schema is still missing.
      expect((await storage.schemaStatus()).pending).toHaveLength(Object.keys(migrations).length);
    });

    it("refuses a schema that is behind, naming the pending migrations; starts once migrated", async () => {
      const storage = (await database())();
      await storage.migrate();
      await storage.db
        .deleteFrom("channelkit_migration" as never)
        .where("name" as never, "=", LAST as never)
        .execute();
      expect(await storage.schemaStatus()).toMatchObject({ pending: [LAST], unknown: [] });
      const started = createChannelService({ storage, flows: demoFlows, secretKey: KEY_A, logger: recorder() });
      await expect(started).rejects.toThrow(`the database schema is behind: 1 of ${Object.keys(migrations).length} migrations are not applied (${LAST})`);
      await expect(started).rejects.toThrow("await storage.migrate()");

      // The migration's own tables exist already: recording it as applied again stands for `migrate()` here.
      await storage.db
        .insertInto("channelkit_migration" as never)
        .values({ name: LAST, timestamp: new Date().toISOString() } as never)
        .execute();
      const logger = recorder();
      const service = await createChannelService({ storage, flows: demoFlows, secretKey: KEY_A, logger });
      expect(logger.warnings).toEqual([]);
      await service.close();
    });

    it("starts on a database a newer version migrated, with a warning naming the migrations it does not know", async () => {
      const storage = (await database())();
      await storage.migrate();
      await storage.db
        .insertInto("channelkit_migration" as never)
        .values({ name: "9999_from_the_future", timestamp: new Date().toISOString() } as never)
        .execute();
      expect(await storage.schemaStatus()).toMatchObject({ pending: [], unknown: ["9999_from_the_future"] });
      // An older instance restarting during a rolling upgrade migrates (nothing to do) as it starts: it must not refuse.
      await storage.migrate();
      expect(await storage.schemaStatus()).toMatchObject({ pending: [], unknown: ["9999_from_the_future"] });
      const logger = recorder();
      const service = await createChannelService({ storage, flows: demoFlows, secretKey: KEY_A, logger });
      expect(logger.warnings).toEqual([expect.stringContaining("migrations this version of channelkit does not know (9999_from_the_future)")]);
      await service.close();
    });

    it("warns of channels whose signing secret the master key cannot open, naming them, and their 503 says so", async () => {
      const opener = await database();
      const first = opener();
      await first.migrate();
      const sealer = await createChannelService({ storage: first, flows: demoFlows, secretKey: KEY_A, logger: recorder() });
      const { tenant } = await sealer.admin.createTenant({ name: "Acme" });
      const signed = await sealer.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
      const other = await sealer.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
      const unsigned = await sealer.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
      await sealer.close();

      // The same key: nothing to say.
      const quiet = recorder();
      await (await createChannelService({ storage: opener(), flows: demoFlows, secretKey: KEY_A, logger: quiet })).close();
      expect(quiet.warnings).toEqual([]);

      const logger = recorder();
      const service = await createChannelService({ storage: opener(), flows: demoFlows, secretKey: KEY_B, logger });
      try {
        const warning = logger.warnings.find((line) => line.includes("signing secrets"));
        expect(warning).toContain("the signing secrets of 2 channel(s) cannot be opened with the configured master key (CHANNELKIT_SECRET_KEY)");
        expect(warning).toContain(signed.channel.id);
        expect(warning).toContain(other.channel.id);
        expect(warning).not.toContain(unsigned.channel.id);

        // The secret is opened before the signature is read: 503 whatever the header says.
        const response = await service.handler(
          new Request("http://test/public/v1/api/execute", {
            method: "POST",
            headers: { authorization: `Bearer ${signed.api_key}`, "content-type": "application/json" },
            body: JSON.stringify({ payload: "hi" }),
          }),
        );
        expect(response.status).toBe(503);
        const answer = (await response.json()) as { error: { code: string; message: string } };
        expect(answer.error.code).toBe("signing_secret_unavailable");
        expect(answer.error.message).toContain("cannot be opened with the master key the service is configured with");
        expect(answer.error.message).not.toContain("no signing secret is configured");
      } finally {
        await service.close();
      }
    });

    it("warns of channels bound to a flow the service does not register, naming them, and answers their runs 503 flow_unavailable", async () => {
      const opener = await database();
      const first = opener();
      await first.migrate();
      const support = defineFlow({
        name: "support",
        async *run() {
          yield text("How can I help?");
        },
      });
      const host = await createChannelService({ storage: first, flows: [...demoFlows, support], secretKey: KEY_A, logger: recorder() });
      const { tenant } = await host.admin.createTenant({ name: "Acme" });
      const bound = await host.admin.createChannel({ tenantId: tenant.id, flow: "support" });
      const archived = await host.admin.createChannel({ tenantId: tenant.id, flow: "support" });
      await host.admin.updateChannel(archived.channel.id, { state: "archived" });
      const echo = await host.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
      const hook = await host.admin.createChannel({ tenantId: tenant.id, flow: "support", type: "webhook", languages: ["en_US"] });
      await host.close();

      // A server started without the host's flow (the demo flows only).
      const logger = recorder();
      const service = await createChannelService({ storage: opener(), flows: demoFlows, secretKey: KEY_A, logger });
      try {
        expect(logger.warnings).toHaveLength(1);
        expect(logger.warnings[0]).toContain(`2 channel(s) are bound to a flow this service does not register`);
        expect(logger.warnings[0]).toContain(`${bound.channel.id} (flow "support")`);
        expect(logger.warnings[0]).toContain(`${hook.channel.id} (flow "support")`);
        expect(logger.warnings[0]).not.toContain(archived.channel.id);
        expect(logger.warnings[0]).not.toContain(echo.channel.id);

        for (const stream of [false, true]) {
          const response = await service.handler(
            new Request("http://test/public/v1/api/execute", {
              method: "POST",
              headers: { authorization: `Bearer ${bound.api_key}`, "content-type": "application/json" },
              body: JSON.stringify({ payload: "hi", stream }),
            }),
          );
          expect(response.status).toBe(503);
          expect(await response.json()).toEqual({
            error: { code: "flow_unavailable", message: 'This channel is bound to the flow "support", which this service does not register.' },
          });
        }
        // Logged once for the channel, not once per request.
        expect(logger.errors.filter((line) => line.includes(bound.channel.id))).toHaveLength(1);

        // The conversation is checked before the run, the flow with it: an unknown or
        // foreign conversation is refused as such, not as an unavailable flow.
        const execute = (key: string, body: Record<string, unknown>) =>
          service.handler(
            new Request("http://test/public/v1/api/execute", {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify(body),
            }),
          );
        const other = (await (await execute(echo.api_key, { payload: "hi", stream: false })).json()) as { conversation_id: string };
        const refusals = [
          [{ payload: "hi", conversation_id: crypto.randomUUID() }, 404, "conversation_not_found"],
          [{ payload: "hi", conversation_id: other.conversation_id }, 403, "conversation_forbidden"],
        ] as const;
        for (const [body, status, code] of refusals) {
          const response = await execute(bound.api_key, body);
          expect(response.status).toBe(status);
          expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code);
        }
        const hooked = await service.handler(
          new Request(`http://test/channels/webhook/${hook.channel.client_id}/newMessage`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ conversationId: crypto.randomUUID(), userInput: "hi" }),
          }),
        );
        expect(hooked.status).toBe(404);
        expect(((await hooked.json()) as { error: { code: string } }).error.code).toBe("conversation_not_found");
      } finally {
        await service.close();
      }
    });
  });
}

startupChecks("SQLite", openSqlite);
describeWithPostgres("Postgres", (serverUrl) =>
  startupChecks("Postgres", async () => {
    const database = await createTestDatabase(serverUrl);
    return { storage: () => postgres(database.url), dispose: () => database.drop() };
  }),
);
