/**
 * Nothing given away (issue 16, point 6): every key, signing secret and admin token a
 * session creates or uses, over real HTTP on SQLite, is looked for in the database files
 * (the WAL included), in every log line, and in every answer. Each may appear only in the
 * one answer that created it; the database keeps hashes and sealed secrets, never clear text.
 */
import { randomUUID } from "node:crypto";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminApi, createChannelService, liveChatInbox, signRequestBody } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";
import { serve } from "@channelkit/node";
import { SignJWT } from "jose";
import { afterAll, describe, expect, it } from "vitest";

const db = join(tmpdir(), `channelkit-secrets-${randomUUID()}.db`);
afterAll(async () => {
  await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
});

describe("secrets", () => {
  it("appear in clear only in the answer that created them: never in the database files, a log line or another answer", async () => {
    const adminSecret = `admin-${randomUUID()}-${randomUUID()}`;
    const masterKey = "cd".repeat(32);
    const logs: string[] = [];
    const log = (...args: unknown[]) => void logs.push(args.map((arg) => (arg instanceof Error ? `${arg.message} ${arg.stack}` : String(arg))).join(" "));
    const storage = sqlite(db);
    await storage.migrate();
    const service = await createChannelService({
      storage,
      flows: demoFlows,
      secretKey: masterKey,
      logger: { warn: log, error: log },
      plugins: [adminApi({ secret: adminSecret })],
      livechat: liveChatInbox({ secret: adminSecret }),
    });
    const server = await serve(service, { port: 0 });
    /** Every answer's status line, headers and body, in order; and what each secret's creating answer was. */
    const answers: string[] = [];
    const created = new Map<string, number>();
    const call = async (path: string, init: RequestInit = {}) => {
      const response = await fetch(`${server.url}${path}`, init);
      const text = await response.text();
      answers.push(`${response.status} ${JSON.stringify([...response.headers])} ${text}`);
      return text;
    };
    const remember = (secret: string | null | undefined) => {
      if (secret) created.set(secret, answers.length - 1);
    };

    const { tenant } = await service.admin.createTenant({ name: "Secrets" });
    const server1 = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
    const widget = await service.admin.createChannel({ tenantId: tenant.id, flow: "handover", mode: "public", allowedOrigins: ["https://shop.example"] });
    const hook = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "webhook", requireSignature: true });
    // Made by service.admin, not over HTTP: no answer may show them at all.
    const quiet = [server1.api_key, server1.signing_secret, widget.api_key, hook.api_key, hook.signing_secret].filter((value): value is string => !!value);
    const token = await new SignJWT({ tenant_ids: [tenant.id] })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("ops")
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode(adminSecret));
    const admin = { authorization: `Bearer ${token}`, "x-tenant-id": tenant.id };

    // Use them: signed executes (good and bad signatures), history, the widget, the webhook, live chat.
    const body = JSON.stringify({ payload: "hello" });
    const signingSecret = server1.signing_secret as string;
    const run = JSON.parse(
      await call("/public/v1/api/execute", {
        method: "POST",
        headers: {
          authorization: `Bearer ${server1.api_key}`,
          "content-type": "application/json",
          "x-service-signature": await signRequestBody(signingSecret, body),
        },
        body,
      }),
    ) as { conversation_id: string };
    await call("/public/v1/api/execute", {
      method: "POST",
      headers: { authorization: `Bearer ${server1.api_key}`, "content-type": "application/json", "x-service-signature": "t=1,v1=00" },
      body,
    });
    await call("/public/v1/api/execute", {
      method: "POST",
      headers: { authorization: `Bearer ${server1.api_key}x`, "content-type": "application/json" },
      body,
    });
    await call(`/public/v1/api/conversations/${run.conversation_id}/messages`, { headers: { authorization: `Bearer ${server1.api_key}` } });
    await call("/public/widget/config", { headers: { authorization: `Bearer ${widget.api_key}`, origin: "https://shop.example" } });
    await call("/public/widget/config", { headers: { authorization: `Bearer ${server1.api_key}` } });
    const handover = JSON.parse(
      await call("/public/v1/api/execute", {
        method: "POST",
        headers: { authorization: `Bearer ${widget.api_key}`, "content-type": "application/json" },
        body,
      }),
    ) as { conversation_id: string };
    const start = JSON.stringify({ language: "en_US" });
    await call(`/channels/webhook/${hook.channel.client_id}/startConversation`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-signature": await signRequestBody(hook.signing_secret as string, start) },
      body: start,
    });
    await call(`/api/v1/livechat/conversations/${handover.conversation_id}/accept`, { method: "POST", headers: admin });
    await call(`/api/v1/channels/${server1.channel.id}`, { headers: admin });
    await call(`/api/v1/channels/${server1.channel.id}`, { headers: { ...admin, authorization: `Bearer ${token}x` } });
    // Rotations over HTTP: their answers are the one place the new key and secret show.
    const rotatedKey = (JSON.parse(await call(`/api/v1/channels/${server1.channel.id}/rotate-key`, { method: "POST", headers: admin })) as { api_key: string })
      .api_key;
    remember(rotatedKey);
    const rotatedSecret = (
      JSON.parse(await call(`/api/v1/channels/${server1.channel.id}/rotate-signing-secret`, { method: "POST", headers: admin })) as { signing_secret: string }
    ).signing_secret;
    remember(rotatedSecret);
    await call("/public/v1/api/execute", { method: "POST", headers: { authorization: `Bearer ${server1.api_key}`, "content-type": "application/json" }, body });
    await call("/api/v1/audit", { headers: admin });

    server.server.closeAllConnections();
    await server.close();
    await service.close();

    const files = Buffer.concat(await Promise.all(["", "-wal", "-shm"].map((suffix) => readFile(`${db}${suffix}`).catch(() => Buffer.alloc(0))))).toString(
      "latin1",
    );
    const secrets = [...quiet, rotatedKey, rotatedSecret, token, adminSecret, masterKey];
    expect(secrets.every((secret) => secret.length >= 20)).toBe(true);
    for (const secret of secrets) {
      expect(files.includes(secret), "in the database files").toBe(false);
      expect(
        logs.filter((line) => line.includes(secret)),
        "in a log line",
      ).toEqual([]);
      const shownIn = answers.flatMap((answer, index) => (answer.includes(secret) ? [index] : []));
      expect(shownIn, `answers showing ${secret.slice(0, 12)}…`).toEqual(created.has(secret) ? [created.get(secret)] : []);
    }
  });
});
