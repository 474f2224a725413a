import { describe, expect, it } from "vitest";
import { execute, expectError, history, runJson, unknownKey } from "./client.js";
import type { Harness } from "./harness.js";

const HELLO = { payload: "hello", stream: false };

/** 401 `missing_api_key` and `invalid_api_key` on both API routes. */
export function authTests(h: Harness): void {
  describe("API keys", () => {
    it("401 missing_api_key without an Authorization header", async () => {
      await expectError(await execute(h, null, HELLO), 401, "missing_api_key");
    });

    it("401 missing_api_key when the scheme is not Bearer or the token is empty", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, null, HELLO, { authorization: `Basic ${channel.key}` }), 401, "missing_api_key");
      await expectError(await execute(h, null, HELLO, { authorization: channel.key }), 401, "missing_api_key");
      await expectError(await execute(h, null, HELLO, { authorization: "Bearer " }), 401, "missing_api_key");
    });

    it("401 invalid_api_key for a token that is not a key", async () => {
      await expectError(await execute(h, "not-a-key", HELLO), 401, "invalid_api_key");
    });

    it("401 invalid_api_key for a Bearer token with something after the key: it is a key, not the channel's", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, null, HELLO, { authorization: `Bearer ${channel.key} extra` }), 401, "invalid_api_key");
      await expectError(await execute(h, null, HELLO, { authorization: `Bearer ${channel.key},${channel.key}` }), 401, "invalid_api_key");
      // Spaces around the key are not part of it.
      expect((await execute(h, null, HELLO, { authorization: `bearer   ${channel.key}  ` })).status).toBe(200);
    });

    it("401 invalid_api_key for a well-formed key that no channel has, of every prefix", async () => {
      for (const prefix of ["svc_live_", "svc_test_", "svc_pub_"] as const) {
        await expectError(await execute(h, unknownKey(prefix), HELLO), 401, "invalid_api_key");
      }
    });

    it("a key revoked by rotation is 401 invalid_api_key at once; the new key works and keeps the prefix", async () => {
      const channel = await h.channel({ flow: "echo", environment: "staging" });
      const rotated = await h.target.admin.rotateKey(channel.id);
      expect(rotated.api_key.startsWith("svc_test_")).toBe(true);
      expect(rotated.channel).toEqual({ id: channel.id, api_key_hint: `svc_test_****${rotated.api_key.slice(-4)}` });
      await expectError(await execute(h, channel.key, HELLO), 401, "invalid_api_key");
      await expectError(await history(h, channel.key, crypto.randomUUID()), 401, "invalid_api_key");
      expect((await runJson(h, rotated.api_key, { payload: "hello" })).status).toBe("success");
    });

    it("401 invalid_api_key for an expired key", async (ctx) => {
      const target = h.target;
      if (!target.expireApiKeys) return ctx.skip("the target cannot set a key's expiry (expireApiKeys)");
      const channel = await h.channel({ flow: "echo" });
      expect((await runJson(h, channel.key, { payload: "before" })).status).toBe("success");
      await target.expireApiKeys(channel.id);
      await expectError(await execute(h, channel.key, HELLO), 401, "invalid_api_key");
    });

    it("the history route checks the key the same way", async () => {
      const id = crypto.randomUUID();
      await expectError(await history(h, null, id), 401, "missing_api_key");
      await expectError(await history(h, null, id, {}, { authorization: "Basic abc" }), 401, "missing_api_key");
      await expectError(await history(h, unknownKey("svc_pub_"), id), 401, "invalid_api_key");
    });
  });
}
