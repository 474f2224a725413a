import { describe, expect, it } from "vitest";
import { adminFetch, adminOk, channelAdminPath, tokenFor } from "./admin-client.js";
import { execute, expectError, history } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";
import { webhookPost } from "./webhook.js";
import { fetch } from "./conformance.js";

const APP = "https://rate.example";

/** An execute with a publishable key, as a page sends it. */
function pageExecute(h: Harness, channel: TestChannel, headers: Record<string, string> = {}) {
  return fetch(h.url("/public/v1/api/execute"), {
    method: "POST",
    headers: { authorization: `Bearer ${channel.key}`, "content-type": "application/json", origin: APP, ...headers },
    body: JSON.stringify({ payload: "hi", stream: false }),
  });
}

/** Asserts a 200, and returns the answer's RateLimit fields. */
async function served(response: Response): Promise<{ policy: string | null; limit: string | null }> {
  const text = await response.text();
  expect(response.status, text).toBe(200);
  return { policy: response.headers.get("ratelimit-policy"), limit: response.headers.get("ratelimit") };
}

/** Asserts a 429 `rate_limited` in the envelope, with `Retry-After` (whole seconds, within the window) and the IETF fields. */
async function limited(response: Response, policy: string, windowSeconds = 60): Promise<void> {
  const retryAfter = response.headers.get("retry-after");
  const policies = response.headers.get("ratelimit-policy");
  const remaining = response.headers.get("ratelimit");
  await expectError(response, 429, "rate_limited");
  expect(retryAfter).toMatch(/^\d+$/);
  expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
  expect(Number(retryAfter)).toBeLessThanOrEqual(windowSeconds);
  expect(policies).toContain(`"${policy}";q=`);
  expect(policies).toContain(`;w=${windowSeconds}`);
  expect(remaining).toMatch(new RegExp(`"${policy}";r=0;t=\\d+`));
}

const rule = (requests: number) => ({ requests, windowSeconds: 60 });

/** Rate limits a channel sets for itself, on a service with the default limits. */
export function rateLimitTests(h: Harness): void {
  describe("rate limits", () => {
    it("a publishable key over its channel's limit is 429 rate_limited with Retry-After and the RateLimit fields, on execute and history alike; another channel is served", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], rateLimits: { publishableKey: rule(3) } });
      const other = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      const seen: (string | null)[] = [];
      let conversationId = "";
      for (let i = 0; i < 2; i++) {
        const response = await pageExecute(h, channel);
        conversationId = ((await response.clone().json()) as { conversation_id: string }).conversation_id;
        const { policy, limit } = await served(response);
        expect(policy).toContain('"publishable_key";q=3;w=60');
        seen.push(limit);
      }
      expect(seen[0]).toMatch(/"publishable_key";r=2;t=\d+/);
      expect(seen[1]).toMatch(/"publishable_key";r=1;t=\d+/);
      // The history route counts against the same key.
      expect((await history(h, channel.key, conversationId, {}, { origin: APP })).status).toBe(200);
      const refused = await pageExecute(h, channel);
      // A page's script can read when to retry.
      expect(refused.headers.get("access-control-expose-headers")).toMatch(/Retry-After/i);
      await limited(refused, "publishable_key");
      await limited(await history(h, channel.key, conversationId, {}, { origin: APP }), "publishable_key");
      await served(await pageExecute(h, other));
    });

    it("the admin PATCH sets rate_limits (shown by GET), false lifts one, and a malformed one is 422 validation_error", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      const token = await tokenFor(h, channel.tenantId);
      const request = (body: unknown) => ({ token, tenant: channel.tenantId, body });
      const set = await adminOk(h, "PATCH", channelAdminPath(channel.id), request({ rate_limits: { publishable_key: { requests: 2, window_seconds: 60 } } }));
      expect(set.channel.rate_limits).toEqual({ publishable_key: { requests: 2, window_seconds: 60 } });
      const shown = await adminOk(h, "GET", channelAdminPath(channel.id), { token, tenant: channel.tenantId });
      expect(shown.channel.rate_limits).toEqual({ publishable_key: { requests: 2, window_seconds: 60 } });
      await served(await pageExecute(h, channel));
      await served(await pageExecute(h, channel));
      await limited(await pageExecute(h, channel), "publishable_key");

      const lifted = await adminOk(h, "PATCH", channelAdminPath(channel.id), request({ rate_limits: { publishable_key: false, client_address: false } }));
      expect(lifted.channel.rate_limits).toEqual({ publishable_key: false, client_address: false });
      const { policy } = await served(await pageExecute(h, channel));
      expect(policy).toBeNull();
      // null takes the service's limits again: the defaults are generous.
      const reset = await adminOk(h, "PATCH", channelAdminPath(channel.id), request({ rate_limits: null }));
      expect(reset.channel.rate_limits).toEqual({});
      expect((await served(await pageExecute(h, channel))).policy).toContain('"publishable_key"');

      for (const bad of [
        { publishable_key: { requests: 0, window_seconds: 60 } },
        { publishable_key: { requests: 5, window_seconds: 0 } },
        { publishable_key: { requests: 1.5, window_seconds: 60 } },
        { publishable_key: { requests: 5 } },
        { publishable_key: true },
        { per_key: { requests: 5, window_seconds: 60 } },
        { failed_auth: { requests: 5, window_seconds: 60 } },
        "fast",
      ]) {
        await expectError(await adminFetch(h, "PATCH", channelAdminPath(channel.id), request({ rate_limits: bad })), 422, "validation_error");
      }
    });

    it("server keys are not limited unless the channel or the service sets a limit", async () => {
      const channel = await h.channel({ flow: "echo" });
      const answers = await Promise.all(Array.from({ length: 30 }, () => execute(h, channel.key, { payload: "hi", stream: false })));
      for (const response of answers) {
        const { policy } = await served(response);
        expect(policy).toBeNull();
      }
      await h.update(channel, { rateLimits: { serverKey: rule(2) } });
      await served(await execute(h, channel.key, { payload: "hi", stream: false }));
      await served(await execute(h, channel.key, { payload: "hi", stream: false }));
      await limited(await execute(h, channel.key, { payload: "hi", stream: false }), "server_key");
    });

    it("per client address, X-Forwarded-For is ignored unless the service trusts a proxy: a client cannot pick its address", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], rateLimits: { clientAddress: rule(2) } });
      await served(await pageExecute(h, channel, { "x-forwarded-for": "198.51.100.1" }));
      await served(await pageExecute(h, channel, { "x-forwarded-for": "198.51.100.2" }));
      await limited(await pageExecute(h, channel, { "x-forwarded-for": "198.51.100.3" }), "client_address");
    });

    it("the widget routes count under the publishable key", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], rateLimits: { publishableKey: rule(2) } });
      const config = () => fetch(h.url("/public/widget/config"), { headers: { authorization: `Bearer ${channel.key}`, origin: APP } });
      await served(await config());
      await served(await config());
      await limited(await config(), "publishable_key");
    });

    it("a webhook channel over its limit per client_id is 429 rate_limited on both routes", async () => {
      const channel = await h.channel({ flow: "echo", type: "webhook", languages: ["en_US"], rateLimits: { webhookClient: rule(2) } });
      const clientId = (channel.view as { client_id: string }).client_id;
      const start = () => webhookPost(h, clientId, "startConversation", { language: "en_US", integrationContext: {} });
      const started = await start();
      const conversationId = ((await started.clone().json()) as { conversation: { conversation: { id: string } } }).conversation.conversation.id;
      await served(started);
      await served(await webhookPost(h, clientId, "newMessage", { conversationId, userInput: "hello" }));
      await limited(await start(), "webhook_client");
      await limited(await webhookPost(h, clientId, "newMessage", { conversationId, userInput: "again" }), "webhook_client");
    });
  });
}

/**
 * Limits of the service itself, on a target started with small ones (`failedAuth` and
 * `admin` of 5 a minute) behind one trusted proxy: each test sends its own
 * `X-Forwarded-For` address, so that their counts stay apart.
 */
export function serviceRateLimitTests(h: Harness, limit: number): void {
  const address = () => `203.0.113.${Math.floor(Math.random() * 250) + 1}, 10.0.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250) + 1}`;

  describe("rate limits of the service, behind a trusted proxy", () => {
    it("failed authentications are counted per client address: past the limit a wrong key is 429, a valid key from that address is still served, another address still gets 401", async () => {
      const channel = await h.channel({ flow: "echo" });
      const from = address();
      const wrong = (forwarded: string) =>
        fetch(h.url("/public/v1/api/execute"), {
          method: "POST",
          headers: { authorization: "Bearer svc_live_wrongwrongwrongwrongwrongwrongwrong", "content-type": "application/json", "x-forwarded-for": forwarded },
          body: JSON.stringify({ payload: "hi" }),
        });
      for (let i = 0; i < limit; i++) await expectError(await wrong(from), 401, "invalid_api_key");
      await limited(await wrong(from), "failed_auth");
      const valid = await fetch(h.url("/public/v1/api/execute"), {
        method: "POST",
        headers: { authorization: `Bearer ${channel.key}`, "content-type": "application/json", "x-forwarded-for": from },
        body: JSON.stringify({ payload: "hi", stream: false }),
      });
      await served(valid);
      await expectError(await wrong(address()), 401, "invalid_api_key");
    });

    it("an unknown webhook client_id is a failed authentication: past the limit from one address, 429 instead of 404", async () => {
      const from = address();
      const unknown = () =>
        fetch(h.url(`/channels/webhook/${encodeURIComponent(`no-such-client-${Math.random()}`)}/startConversation`), {
          method: "POST",
          headers: { "content-type": "application/json", "x-forwarded-for": from },
          body: JSON.stringify({}),
        });
      for (let i = 0; i < limit; i++) await expectError(await unknown(), 404, "channel_not_found");
      await limited(await unknown(), "failed_auth");
    });

    it("admin calls are counted per tenant: past the limit 429, while another tenant is served", async () => {
      const channel = await h.channel({ flow: "echo" });
      const other = await h.channel({ flow: "echo" });
      const get = async (target: TestChannel) =>
        adminFetch(h, "GET", channelAdminPath(target.id), { token: await tokenFor(h, target.tenantId), tenant: target.tenantId });
      for (let i = 0; i < limit; i++) await served(await get(channel));
      await limited(await get(channel), "admin");
      await served(await get(other));
    });

    it("admin calls refused to another tenant's token count against that token, not the tenant it names: the tenant's own admins are still served", async () => {
      const victim = await h.channel({ flow: "echo" });
      const intruder = await tokenFor(h, await h.tenant(), { subject: `mallory-${Math.random()}` });
      const attempt = () => adminFetch(h, "GET", channelAdminPath(victim.id), { token: intruder, tenant: victim.tenantId });
      for (let i = 0; i < limit; i++) await expectError(await attempt(), 403, "forbidden");
      await limited(await attempt(), "admin");
      await served(await adminFetch(h, "GET", channelAdminPath(victim.id), { token: await tokenFor(h, victim.tenantId), tenant: victim.tenantId }));
    });

    it("the client address is the entry of X-Forwarded-For that the trusted proxy appended: what the client wrote before it does not change it", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], rateLimits: { clientAddress: rule(1) } });
      const first = `198.18.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250) + 1}`;
      const second = `198.19.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250) + 1}`;
      await served(await pageExecute(h, channel, { "x-forwarded-for": first }));
      await limited(await pageExecute(h, channel, { "x-forwarded-for": `192.0.2.77, ${first}` }), "client_address");
      await served(await pageExecute(h, channel, { "x-forwarded-for": second }));
    });
  });
}
