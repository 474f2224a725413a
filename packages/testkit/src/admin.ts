import { describe, expect, it } from "vitest";
import { AUDIT_PATH, adminFetch, adminOk, adminToken, channelAdminPath, tokenFor } from "./admin-client.js";
import { execute, expectAccepted, expectError, runJson } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";
import { signatureHeader } from "./signing.js";
import { readSse } from "./sse.js";
import { fetch } from "./conformance.js";

const HELLO = { payload: "hello", stream: false };

/** The admin routes that act on a channel, as `[method, operation]`. */
const CHANNEL_ROUTES = [
  ["POST", "rotate-key"],
  ["POST", "rotate-signing-secret"],
  ["PATCH", undefined],
  ["GET", undefined],
] as const;

/** An echo channel and a token granting its tenant. */
async function administered(h: Harness, spec: Parameters<Harness["channel"]>[0] = { flow: "echo" }): Promise<{ channel: TestChannel; token: string }> {
  const channel = await h.channel(spec);
  return { channel, token: await tokenFor(h, channel.tenantId) };
}

function routeRequest(
  h: Harness,
  method: string,
  operation: "rotate-key" | "rotate-signing-secret" | undefined,
  channelId: string,
  request: Parameters<typeof adminFetch>[3],
) {
  return adminFetch(h, method, channelAdminPath(channelId, operation), method === "PATCH" ? { body: { default_stream: false }, ...request } : request);
}

async function signedRun(h: Harness, channel: TestChannel, secret: string): Promise<Response> {
  const raw = JSON.stringify(HELLO);
  return execute(h, channel.key, raw, { signature: signatureHeader(secret, raw) });
}

/** The admin routes behind an admin JWT: rotate-key, rotate-signing-secret, the channel's settings, the audit trail. */
export function adminTests(h: Harness): void {
  describe("admin routes", () => {
    describe("authentication (rule 7) and its codes", () => {
      it("401 missing_tenant without X-Tenant-ID, on every route, before the token is looked at", async () => {
        const { channel, token } = await administered(h);
        for (const [method, operation] of CHANNEL_ROUTES) {
          await expectError(await routeRequest(h, method, operation, channel.id, { token }), 401, "missing_tenant");
          await expectError(await routeRequest(h, method, operation, channel.id, {}), 401, "missing_tenant");
          await expectError(await routeRequest(h, method, operation, channel.id, { token, tenant: "  " }), 401, "missing_tenant");
        }
        await expectError(await adminFetch(h, "GET", AUDIT_PATH, { token }), 401, "missing_tenant");
      });

      it("401 unauthorized without a token, with another scheme, with a token that is not a JWT or is signed with another secret", async () => {
        const { channel } = await administered(h);
        const tenant = channel.tenantId;
        const forged = await tokenFor(h, tenant, { secret: "another-secret-of-at-least-32-characters!" });
        for (const [method, operation] of CHANNEL_ROUTES) {
          await expectError(await routeRequest(h, method, operation, channel.id, { tenant }), 401, "unauthorized");
          await expectError(await routeRequest(h, method, operation, channel.id, { tenant, authorization: `Basic ${forged}` }), 401, "unauthorized");
          await expectError(await routeRequest(h, method, operation, channel.id, { tenant, token: "not.a.jwt" }), 401, "unauthorized");
          await expectError(await routeRequest(h, method, operation, channel.id, { tenant, token: forged }), 401, "unauthorized");
        }
        await expectError(await adminFetch(h, "GET", AUDIT_PATH, { tenant, token: forged }), 401, "unauthorized");
      });

      it("a channel API key is never an admin credential, whatever its kind", async () => {
        for (const spec of [{ flow: "echo" }, { flow: "echo", environment: "dev" as const }, { flow: "echo", mode: "public" as const }]) {
          const { channel } = await administered(h, spec);
          await expectError(await routeRequest(h, "POST", "rotate-key", channel.id, { tenant: channel.tenantId, token: channel.key }), 401, "unauthorized");
        }
      });

      it("an expired token and a token not valid yet are 401 unauthorized; a valid one passes", async () => {
        const { channel } = await administered(h);
        const tenant = channel.tenantId;
        const now = Math.floor(Date.now() / 1000);
        const expired = await tokenFor(h, tenant, { expires: now - 120 });
        const early = await tokenFor(h, tenant, { notBefore: now + 120 });
        await expectError(await adminFetch(h, "GET", channelAdminPath(channel.id), { tenant, token: expired }), 401, "unauthorized");
        await expectError(await adminFetch(h, "GET", channelAdminPath(channel.id), { tenant, token: early }), 401, "unauthorized");
        const fresh = await tokenFor(h, tenant, { notBefore: now - 1, expires: now + 120 });
        expect((await adminOk(h, "GET", channelAdminPath(channel.id), { tenant, token: fresh })).channel.id).toBe(channel.id);
      });

      it("403 forbidden when the token grants other tenants only, in either claim form", async () => {
        const { channel } = await administered(h);
        const other = await h.tenant("other");
        const tenant = channel.tenantId;
        const tokens = [
          await tokenFor(h, other),
          await adminToken(h, { claims: { organization_id: other } }),
          await adminToken(h, { claims: { tenant_ids: [] } }),
          await adminToken(h),
        ];
        for (const token of tokens) {
          for (const [method, operation] of CHANNEL_ROUTES)
            await expectError(await routeRequest(h, method, operation, channel.id, { tenant, token }), 403, "forbidden");
          await expectError(await adminFetch(h, "GET", AUDIT_PATH, { tenant, token }), 403, "forbidden");
        }
        // The key was not rotated by any of those.
        expect((await runJson(h, channel.key, HELLO)).status).toBe("success");
      });

      it("tenant_ids lists several tenants, organization_id names one: either grants", async () => {
        const { channel } = await administered(h);
        const tenant = channel.tenantId;
        for (const claims of [
          { tenant_ids: [await h.tenant(), tenant] },
          { organization_id: tenant },
          { tenant_ids: [crypto.randomUUID()], organization_id: tenant },
        ]) {
          const token = await adminToken(h, { claims });
          expect((await adminOk(h, "GET", channelAdminPath(channel.id), { tenant, token })).channel.id).toBe(channel.id);
        }
      });

      it("a token for tenant A on tenant B's channel: 403 with B's id, 404 channel_not_found with A's; nothing changes", async () => {
        const a = await administered(h);
        const b = await administered(h);
        await expectError(await routeRequest(h, "POST", "rotate-key", b.channel.id, { tenant: b.channel.tenantId, token: a.token }), 403, "forbidden");
        for (const [method, operation] of CHANNEL_ROUTES) {
          await expectError(await routeRequest(h, method, operation, b.channel.id, { tenant: a.channel.tenantId, token: a.token }), 404, "channel_not_found");
        }
        expect((await runJson(h, b.channel.key, HELLO)).status).toBe("success");
      });

      it("404 channel_not_found for an id that is no channel", async () => {
        const { channel, token } = await administered(h);
        for (const id of [crypto.randomUUID(), "not-a-uuid"]) {
          for (const [method, operation] of CHANNEL_ROUTES)
            await expectError(await routeRequest(h, method, operation, id, { tenant: channel.tenantId, token }), 404, "channel_not_found");
        }
      });

      it("an upper-case channel id names the same channel on every route (UUIDs compare case-insensitively)", async () => {
        const { channel, token } = await administered(h);
        const upper = channel.id.toUpperCase();
        for (const [method, operation] of CHANNEL_ROUTES) {
          const response = await routeRequest(h, method, operation, upper, { tenant: channel.tenantId, token });
          expect(response.status, `${method} ${operation ?? ""}: ${await response.clone().text()}`).toBe(200);
          expect(((await response.json()) as { channel: { id: string } }).channel.id).toBe(channel.id);
        }
      });

      it("the preflights need no token and allow Authorization, Content-Type and X-Tenant-ID", async () => {
        const { channel } = await administered(h);
        for (const [path, methods] of [
          [channelAdminPath(channel.id), "GET, PATCH, OPTIONS"],
          [channelAdminPath(channel.id, "rotate-key"), "POST, OPTIONS"],
          [channelAdminPath(channel.id, "rotate-signing-secret"), "POST, OPTIONS"],
          [AUDIT_PATH, "GET, OPTIONS"],
        ] as const) {
          const response = await fetch(h.url(path), {
            method: "OPTIONS",
            headers: {
              origin: "https://console.example",
              "access-control-request-method": "POST",
              "access-control-request-headers": "authorization,x-tenant-id",
            },
          });
          expect(response.status).toBe(204);
          expect(response.headers.get("access-control-allow-origin")).toBe("https://console.example");
          expect(response.headers.get("access-control-allow-methods")).toBe(methods);
          expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, X-Tenant-ID");
          expect(response.headers.get("access-control-allow-credentials")).toBeNull();
        }
      });
    });

    describe("rotate-key", () => {
      it("answers exactly { api_key, channel: { id, api_key_hint } }; the old key is refused at once, the new one keeps prefix and environment", async () => {
        for (const spec of [
          { flow: "echo" },
          { flow: "echo", environment: "staging" as const },
          { flow: "echo", mode: "public" as const, environment: "dev" as const },
        ]) {
          const { channel, token } = await administered(h, spec);
          const body = await adminOk(h, "POST", channelAdminPath(channel.id, "rotate-key"), { tenant: channel.tenantId, token });
          expect(Object.keys(body).sort()).toEqual(["api_key", "channel"]);
          const prefix = channel.key.slice(0, channel.key.indexOf("_", 4) + 1);
          expect(body.api_key.startsWith(prefix)).toBe(true);
          expect(body.api_key.length).toBeGreaterThanOrEqual(prefix.length + 40);
          expect(body.channel).toEqual({ id: channel.id, api_key_hint: `${prefix}****${body.api_key.slice(-4)}` });
          await expectError(await execute(h, channel.key, HELLO), 401, "invalid_api_key");
          expect((await runJson(h, body.api_key, HELLO)).status).toBe("success");
          const view = (await adminOk(h, "GET", channelAdminPath(channel.id), { tenant: channel.tenantId, token })).channel;
          expect(view).toMatchObject({ api_key_hint: body.channel.api_key_hint, environment: spec.environment ?? "prod" });
        }
      });

      it("twice in a row: only the last key works", async () => {
        const { channel, token } = await administered(h);
        const path = channelAdminPath(channel.id, "rotate-key");
        const first = await adminOk(h, "POST", path, { tenant: channel.tenantId, token });
        const second = await adminOk(h, "POST", path, { tenant: channel.tenantId, token });
        expect(second.api_key).not.toBe(first.api_key);
        await expectError(await execute(h, first.api_key, HELLO), 401, "invalid_api_key");
        expect((await runJson(h, second.api_key, HELLO)).status).toBe("success");
      });
    });

    describe("rotate-signing-secret", () => {
      it("answers exactly { signing_secret, channel: { id, has_signing_secret: true } }; the previous secret is refused at once", async () => {
        const { channel, token } = await administered(h, { flow: "echo", requireSignature: true });
        const previous = channel.signingSecret as string;
        await expectAccepted(await signedRun(h, channel, previous));
        const body = await adminOk(h, "POST", channelAdminPath(channel.id, "rotate-signing-secret"), { tenant: channel.tenantId, token });
        expect(Object.keys(body).sort()).toEqual(["channel", "signing_secret"]);
        expect(body.channel).toEqual({ id: channel.id, has_signing_secret: true });
        expect(body.signing_secret).not.toBe(previous);
        await expectError(await signedRun(h, channel, previous), 401, "invalid_signature");
        await expectAccepted(await signedRun(h, channel, body.signing_secret));
      });

      it("on a channel without a secret, stores one without requiring signatures", async () => {
        const { channel, token } = await administered(h);
        const body = await adminOk(h, "POST", channelAdminPath(channel.id, "rotate-signing-secret"), { tenant: channel.tenantId, token });
        expect(body.channel.has_signing_secret).toBe(true);
        const view = (await adminOk(h, "GET", channelAdminPath(channel.id), { tenant: channel.tenantId, token })).channel;
        expect(view).toMatchObject({ has_signing_secret: true, config: { require_signature: false } });
        expect((await runJson(h, channel.key, HELLO)).status).toBe("success");
      });
    });

    describe("PATCH and GET a channel", () => {
      it("GET answers the spec's channel fields and no key or secret", async () => {
        const { channel, token } = await administered(h, { flow: "echo", requireSignature: true, mode: "public", allowedOrigins: ["https://a.example"] });
        const body = await adminOk(h, "GET", channelAdminPath(channel.id), { tenant: channel.tenantId, token });
        expect(Object.keys(body)).toEqual(["channel"]);
        expect(body.channel).toMatchObject({
          id: channel.id,
          api_key_hint: channel.view.api_key_hint,
          has_signing_secret: true,
          config: { require_signature: true },
          allowed_origins: ["https://a.example"],
          default_stream: false,
          environment: "prod",
          type: "api",
          state: "active",
        });
        const text = JSON.stringify(body);
        expect(text).not.toContain(channel.key);
        expect(text).not.toContain(channel.signingSecret as string);
      });

      it("require_signature false → true answers a one-time signing_secret that signs; unchanged answers none", async () => {
        const { channel, token } = await administered(h);
        const tenant = channel.tenantId;
        const on = await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { config: { require_signature: true } } });
        expect(Object.keys(on).sort()).toEqual(["channel", "signing_secret"]);
        expect(on.channel).toMatchObject({ id: channel.id, has_signing_secret: true, config: { require_signature: true } });
        await expectError(await execute(h, channel.key, HELLO), 401, "signature_required");
        await expectAccepted(await signedRun(h, channel, on.signing_secret));
        const again = await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { config: { require_signature: true } } });
        expect(Object.keys(again)).toEqual(["channel"]);
        await expectAccepted(await signedRun(h, channel, on.signing_secret));
        // The secret it made is audited as one made, as a rotation's is (never the secret itself).
        const { events } = await adminOk(h, "GET", `${AUDIT_PATH}?channel_id=${channel.id}`, { tenant, token });
        const made = (events as Record<string, any>[]).find((event) => event.operation === "update_channel" && event.changes["config.require_signature"]);
        expect(made?.changes).toEqual({
          "config.require_signature": { from: false, to: true },
          has_signing_secret: { from: false, to: true },
          signing_secret: { from: "none", to: "new" },
        });
      });

      it("several PATCHes turning signatures on at once: one answers the signing_secret, which signs; the others answer none", async () => {
        const { channel, token } = await administered(h);
        const tenant = channel.tenantId;
        const answers = await Promise.all(
          Array.from({ length: 8 }, () => adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { config: { require_signature: true } } })),
        );
        const secrets = answers.flatMap((answer) => (answer.signing_secret === undefined ? [] : [answer.signing_secret as string]));
        expect(secrets).toHaveLength(1);
        await expectAccepted(await signedRun(h, channel, secrets[0] as string));
        for (const answer of answers) expect(answer.channel).toMatchObject({ has_signing_secret: true, config: { require_signature: true } });
      });

      it("require_signature true → false keeps the secret; back to true shows no secret (one is shown once, when made), and the kept one still signs", async () => {
        const { channel, token } = await administered(h, { flow: "echo", requireSignature: true });
        const tenant = channel.tenantId;
        const off = await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { config: { require_signature: false } } });
        expect(Object.keys(off)).toEqual(["channel"]);
        expect(off.channel).toMatchObject({ has_signing_secret: true, config: { require_signature: false } });
        expect((await runJson(h, channel.key, HELLO)).status).toBe("success");
        const on = await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { config: { require_signature: true } } });
        expect(Object.keys(on)).toEqual(["channel"]);
        expect(on.channel).toMatchObject({ has_signing_secret: true, config: { require_signature: true } });
        await expectAccepted(await signedRun(h, channel, channel.signingSecret as string));
      });

      it("allowed_origins, default_stream and name change what the channel does at once", async () => {
        const { channel, token } = await administered(h, { flow: "echo", mode: "public", allowedOrigins: ["https://a.example"] });
        const tenant = channel.tenantId;
        const body = await adminOk(h, "PATCH", channelAdminPath(channel.id), {
          tenant,
          token,
          body: { allowed_origins: ["https://b.example"], default_stream: true, name: "Renamed" },
        });
        expect(body.channel).toMatchObject({ allowed_origins: ["https://b.example"], default_stream: true, name: "Renamed" });
        await expectError(await execute(h, channel.key, { payload: "x" }, { origin: "https://a.example" }), 403, "origin_not_allowed");
        const streamed = await execute(h, channel.key, { payload: "x" }, { origin: "https://b.example" });
        expect(streamed.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
        expect((await readSse(streamed)).events.at(-1)).toMatchObject({ type: "finish" });
      });

      it("state: inactive is 409 on execute, active again runs, archived is 410 and final", async () => {
        const { channel, token } = await administered(h);
        const tenant = channel.tenantId;
        const patch = (body: unknown) => adminFetch(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body });
        expect((await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { state: "inactive" } })).channel.state).toBe("inactive");
        await expectError(await execute(h, channel.key, HELLO), 409, "channel_inactive");
        expect((await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { state: "active" } })).channel.state).toBe("active");
        expect((await runJson(h, channel.key, HELLO)).status).toBe("success");
        expect((await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { state: "archived" } })).channel.state).toBe("archived");
        await expectError(await execute(h, channel.key, HELLO), 410, "channel_archived");
        await expectError(await patch({ state: "active" }), 410, "channel_archived");
        await expectError(await patch({ name: "x" }), 410, "channel_archived");
        await expectError(await adminFetch(h, "POST", channelAdminPath(channel.id, "rotate-key"), { tenant, token }), 410, "channel_archived");
        await expectError(await adminFetch(h, "POST", channelAdminPath(channel.id, "rotate-signing-secret"), { tenant, token }), 410, "channel_archived");
        // Reading is not managing: the view still answers, archived.
        expect((await adminOk(h, "GET", channelAdminPath(channel.id), { tenant, token })).channel.state).toBe("archived");
        await expectError(await execute(h, channel.key, HELLO), 410, "channel_archived");
      });

      it("422 validation_error for unknown fields, wrong types and bad values; 415 for a body that is not JSON; nothing changes", async () => {
        const { channel, token } = await administered(h);
        const tenant = channel.tenantId;
        for (const body of [
          { require_signature: true },
          { config: { require_signature: "yes" } },
          { config: { require_signatur: true } },
          { config: true },
          { state: "deleted" },
          { allowed_origins: ["https://a.example/path"] },
          { allowed_origins: "https://a.example" },
          { default_stream: "true" },
          { environment: "dev" },
          { name: 7 },
          [],
          null,
          "{not json",
          "",
        ]) {
          await expectError(await adminFetch(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body }), 422, "validation_error");
        }
        await expectError(
          await adminFetch(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: "a=b", contentType: "application/x-www-form-urlencoded" }),
          415,
          "unsupported_media_type",
        );
        // The message names what is wrong.
        const typo = await adminFetch(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { requireSignature: true } });
        expect(((await typo.json()) as { error: { message: string } }).error.message).toContain("requireSignature");
        const array = await adminFetch(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: [] });
        expect(((await array.json()) as { error: { message: string } }).error.message).toBe("the body must be a JSON object");
        const view = (await adminOk(h, "GET", channelAdminPath(channel.id), { tenant, token })).channel;
        expect(view).toMatchObject({ state: "active", default_stream: false, config: { require_signature: false }, environment: "prod" });
        expect(view.updated_at).toBe(channel.view.updated_at);
      });

      it("an empty patch changes nothing and answers the channel", async () => {
        const { channel, token } = await administered(h);
        const body = await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant: channel.tenantId, token, body: {} });
        expect(body).toEqual({ channel: expect.objectContaining({ id: channel.id, state: "active" }) });
      });
    });

    describe("audit trail", () => {
      it("records every operation with its actor, changes and outcome, refusals included, newest first; never a key or a secret", async () => {
        const { channel, token } = await administered(h, { flow: "echo", mode: "public" });
        const tenant = channel.tenantId;
        const alice = await tokenFor(h, tenant, { subject: "alice@example.com" });
        const rotated = await adminOk(h, "POST", channelAdminPath(channel.id, "rotate-key"), { tenant, token: alice });
        const secret = await adminOk(h, "POST", channelAdminPath(channel.id, "rotate-signing-secret"), { tenant, token: alice });
        const patched = await adminOk(h, "PATCH", channelAdminPath(channel.id), {
          tenant,
          token: alice,
          body: { allowed_origins: ["https://b.example"], config: { require_signature: true } },
        });
        await expectError(
          await adminFetch(h, "PATCH", channelAdminPath(channel.id), { tenant, token: alice, body: { colour: "red" } }),
          422,
          "validation_error",
        );
        const intruder = await tokenFor(h, await h.tenant(), { subject: "mallory" });
        await expectError(await adminFetch(h, "POST", channelAdminPath(channel.id, "rotate-key"), { tenant, token: intruder }), 403, "forbidden");

        const page = await adminOk(h, "GET", `${AUDIT_PATH}?channel_id=${channel.id}`, { tenant, token });
        expect(Object.keys(page).sort()).toEqual(["events", "next_cursor"]);
        const events = page.events as Record<string, any>[];
        expect(events.map((event) => [event.operation, event.outcome, event.error_code, event.actor, event.via])).toEqual([
          ["rotate_key", "failure", "forbidden", "mallory (not granted this tenant)", "http"],
          ["update_channel", "failure", "validation_error", "alice@example.com", "http"],
          ["update_channel", "success", null, "alice@example.com", "http"],
          ["rotate_signing_secret", "success", null, "alice@example.com", "http"],
          ["rotate_key", "success", null, "alice@example.com", "http"],
          ["create_channel", "success", null, "service", "service"],
        ]);
        for (const event of events) {
          expect(event).toMatchObject({ tenant_id: tenant, channel_id: channel.id, timestamp: expect.any(String), id: expect.any(String) });
        }
        expect(events[2]?.changes).toEqual({
          allowed_origins: { from: [], to: ["https://b.example"] },
          "config.require_signature": { from: false, to: true },
        });
        expect(events[4]?.changes).toEqual({ api_key_hint: { from: channel.view.api_key_hint, to: rotated.channel.api_key_hint } });
        const text = JSON.stringify(page);
        for (const clear of [channel.key, rotated.api_key, secret.signing_secret, patched.signing_secret ?? secret.signing_secret, token, alice]) {
          expect(text).not.toContain(clear);
        }
      });

      it("is per tenant, pages with limit and next_cursor, and refuses a bad limit or cursor", async () => {
        const { channel, token } = await administered(h);
        const tenant = channel.tenantId;
        for (let i = 0; i < 4; i++) await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant, token, body: { name: `n${i}` } });
        const other = await administered(h);
        await adminOk(h, "POST", channelAdminPath(other.channel.id, "rotate-key"), { tenant: other.channel.tenantId, token: other.token });

        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const query: string = `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
          const page: { events: { id: string; tenant_id: string }[]; next_cursor: string | null } = await adminOk(h, "GET", AUDIT_PATH + query, {
            tenant,
            token,
          });
          expect(page.events.length).toBeLessThanOrEqual(2);
          for (const event of page.events) expect(event.tenant_id).toBe(tenant);
          seen.push(...page.events.map((event) => event.id));
          cursor = page.next_cursor;
        } while (cursor !== null);
        // The tenant's creation, its channel's, and four patches, each once.
        expect(seen.length).toBe(6);
        expect(new Set(seen).size).toBe(6);

        for (const query of ["?limit=0", "?limit=201", "?limit=two", "?cursor=nonsense", "?colour=red"]) {
          await expectError(await adminFetch(h, "GET", AUDIT_PATH + query, { tenant, token }), 422, "validation_error");
        }
        // Another tenant's channel id filters to nothing, rather than revealing its events.
        expect((await adminOk(h, "GET", `${AUDIT_PATH}?channel_id=${other.channel.id}`, { tenant, token })).events).toEqual([]);
      });
    });
  });
}
