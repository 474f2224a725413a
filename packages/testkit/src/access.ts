import { describe, expect, it } from "vitest";
import { execute, expectError, history, runJson } from "./client.js";
import type { Harness } from "./harness.js";

const HELLO = { payload: "hello", stream: false };
const APP = "https://app.example.com";

/** What a valid key may still be refused for: channel type, state, environment, origin. */
export function accessTests(h: Harness): void {
  describe("channel access", () => {
    it("403 wrong_channel_type for a webhook channel's key, on both routes", async () => {
      const webhook = await h.channel({ flow: "echo", type: "webhook" });
      await expectError(await execute(h, webhook.key, HELLO), 403, "wrong_channel_type");
      await expectError(await history(h, webhook.key, crypto.randomUUID()), 403, "wrong_channel_type");
    });

    it("409 channel_inactive while inactive, and served again once reactivated", async () => {
      const channel = await h.channel({ flow: "echo" });
      await h.update(channel, { state: "inactive" });
      await expectError(await execute(h, channel.key, HELLO), 409, "channel_inactive");
      await expectError(await history(h, channel.key, crypto.randomUUID()), 409, "channel_inactive");
      await h.update(channel, { state: "active" });
      expect((await runJson(h, channel.key, HELLO)).status).toBe("success");
    });

    it("410 channel_archived once archived, on both routes", async () => {
      const channel = await h.channel({ flow: "echo" });
      await h.update(channel, { state: "archived" });
      await expectError(await execute(h, channel.key, HELLO), 410, "channel_archived");
      await expectError(await history(h, channel.key, crypto.randomUUID()), 410, "channel_archived");
    });

    it("403 environment_mismatch when a prod channel's svc_live_ key meets the channel moved to staging", async () => {
      const channel = await h.channel({ flow: "echo", environment: "prod" });
      expect(channel.key.startsWith("svc_live_")).toBe(true);
      await h.update(channel, { environment: "staging" });
      await expectError(await execute(h, channel.key, HELLO), 403, "environment_mismatch");
      await expectError(await history(h, channel.key, crypto.randomUUID()), 403, "environment_mismatch");
    });

    it("403 environment_mismatch between dev and staging for a svc_test_ key", async () => {
      const channel = await h.channel({ flow: "echo", environment: "dev" });
      expect(channel.key.startsWith("svc_test_")).toBe(true);
      await h.update(channel, { environment: "staging" });
      await expectError(await execute(h, channel.key, HELLO), 403, "environment_mismatch");
    });

    it("403 origin_not_allowed for a public key with an Origin outside allowed_origins, compared exactly", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      expect(channel.key.startsWith("svc_pub_")).toBe(true);
      for (const origin of ["https://evil.example.com", "http://app.example.com", "https://app.example.com:8443", "https://APP.example.com", "null"]) {
        await expectError(await execute(h, channel.key, HELLO, { origin }), 403, "origin_not_allowed");
      }
      await expectError(await history(h, channel.key, crypto.randomUUID(), {}, { origin: "https://evil.example.com" }), 403, "origin_not_allowed");
      expect((await runJson(h, channel.key, HELLO, { origin: APP })).status).toBe("success");
    });

    it("a new allowed origin takes effect on the next request", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      const other = "https://other.example.com";
      await expectError(await execute(h, channel.key, HELLO, { origin: other }), 403, "origin_not_allowed");
      await h.update(channel, { allowedOrigins: [APP, other] });
      expect((await runJson(h, channel.key, HELLO, { origin: other })).status).toBe("success");
    });

    it("a public key without an Origin header is accepted (native apps, server code)", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      expect((await runJson(h, channel.key, HELLO)).status).toBe("success");
    });

    it("a server key is not subject to the origin check", async () => {
      const channel = await h.channel({ flow: "echo", allowedOrigins: [APP] });
      expect((await runJson(h, channel.key, HELLO, { origin: "https://anywhere.example.net" })).status).toBe("success");
    });
  });
}
