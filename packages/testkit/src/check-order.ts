import { describe, it } from "vitest";
import { execute, expectError, expectNoConversation, history, runJson, unknownKey } from "./client.js";
import type { Harness } from "./harness.js";
import { paddedBody } from "./body.js";
import { digest, nowSeconds, signatureHeader } from "./signing.js";

const MIB = 1024 * 1024;
const APP = "https://app.example.com";
const EVIL = "https://evil.example.com";
const JSON_HELLO = JSON.stringify({ payload: "hello", stream: false });

/**
 * Two faults at once, where decisions.md's order says which one is reported: each test
 * sets up both and expects the earlier check.
 */
export function checkOrderTests(h: Harness): void {
  describe("order of checks on execute", () => {
    it("missing key beats a bad media type and an oversized body", async () => {
      await expectError(await execute(h, null, paddedBody(MIB + 10), { contentType: "text/plain" }), 401, "missing_api_key");
    });

    it("invalid key beats a bad media type", async () => {
      await expectError(await execute(h, unknownKey(), JSON_HELLO, { contentType: "text/plain" }), 401, "invalid_api_key");
    });

    it("wrong_channel_type beats channel_archived", async () => {
      const webhook = await h.channel({ flow: "echo", type: "webhook" });
      await h.update(webhook, { state: "archived" });
      await expectError(await execute(h, webhook.key, JSON_HELLO), 403, "wrong_channel_type");
    });

    it("wrong_channel_type beats channel_inactive", async () => {
      const webhook = await h.channel({ flow: "echo", type: "webhook" });
      await h.update(webhook, { state: "inactive" });
      await expectError(await execute(h, webhook.key, JSON_HELLO), 403, "wrong_channel_type");
    });

    it("channel_archived beats environment_mismatch", async () => {
      const channel = await h.channel({ flow: "echo" });
      await h.update(channel, { environment: "staging" });
      await h.update(channel, { state: "archived" });
      await expectError(await execute(h, channel.key, JSON_HELLO), 410, "channel_archived");
    });

    it("channel_inactive beats environment_mismatch", async () => {
      const channel = await h.channel({ flow: "echo" });
      await h.update(channel, { environment: "staging", state: "inactive" });
      await expectError(await execute(h, channel.key, JSON_HELLO), 409, "channel_inactive");
    });

    it("channel_inactive beats a bad media type", async () => {
      const channel = await h.channel({ flow: "echo" });
      await h.update(channel, { state: "inactive" });
      await expectError(await execute(h, channel.key, JSON_HELLO, { contentType: "text/plain" }), 409, "channel_inactive");
    });

    it("channel_inactive beats origin_not_allowed", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      await h.update(channel, { state: "inactive" });
      await expectError(await execute(h, channel.key, JSON_HELLO, { origin: EVIL }), 409, "channel_inactive");
    });

    it("environment_mismatch beats origin_not_allowed", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", environment: "dev", allowedOrigins: [APP] });
      await h.update(channel, { environment: "prod" });
      await expectError(await execute(h, channel.key, JSON_HELLO, { origin: EVIL }), 403, "environment_mismatch");
    });

    it("origin_not_allowed beats a bad media type", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      await expectError(await execute(h, channel.key, JSON_HELLO, { origin: EVIL, contentType: "text/plain" }), 403, "origin_not_allowed");
    });

    it("a bad media type beats an oversized body", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, channel.key, paddedBody(MIB + 10), { contentType: "text/plain" }), 415, "unsupported_media_type");
    });

    it("a bad media type beats a missing signature", async () => {
      const channel = await h.channel({ flow: "echo", requireSignature: true });
      await expectError(await execute(h, channel.key, JSON_HELLO, { contentType: "text/plain" }), 415, "unsupported_media_type");
    });

    it("an oversized body beats a missing signature", async () => {
      const channel = await h.channel({ flow: "echo", requireSignature: true });
      await expectError(await execute(h, channel.key, paddedBody(MIB + 10)), 413, "payload_too_large");
    });

    it("signing_secret_unavailable beats signature_required and an invalid body", async () => {
      const channel = await h.channel({ flow: "echo" });
      await h.target.storage.updateChannel(channel.id, { requireSignature: true }, new Date().toISOString());
      await expectError(await execute(h, channel.key, "{not json"), 503, "signing_secret_unavailable");
    });

    it("signature_required beats an invalid body", async () => {
      const channel = await h.channel({ flow: "echo", requireSignature: true });
      await expectError(await execute(h, channel.key, { payload: "" }), 401, "signature_required");
    });

    it("invalid_signature beats an invalid body", async () => {
      const channel = await h.channel({ flow: "echo", requireSignature: true });
      const raw = "{not json";
      await expectError(await execute(h, channel.key, raw, { signature: signatureHeader("wrong secret", raw) }), 401, "invalid_signature");
    });

    it("signature_expired (genuine digest, stale t) beats an invalid body", async () => {
      const channel = await h.channel({ flow: "echo", requireSignature: true });
      const raw = JSON.stringify({ payload: "" });
      const stale = nowSeconds() - 1000;
      const header = `t=${stale},v1=${digest(channel.signingSecret as string, stale, raw)}`;
      await expectError(await execute(h, channel.key, raw, { signature: header }), 401, "signature_expired");
    });

    it("validation_error beats conversation_not_found", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, channel.key, { payload: "", conversation_id: crypto.randomUUID() }), 422, "validation_error");
      await expectError(await execute(h, channel.key, { payload: "hi", stream: "no", conversation_id: crypto.randomUUID() }), 422, "validation_error");
    });

    it("validation_error beats conversation_forbidden", async () => {
      const tenantId = await h.tenant();
      const first = await h.channel({ flow: "echo", tenantId });
      const second = await h.channel({ flow: "echo", tenantId });
      const run = await runJson(h, first.key, { payload: "hi" });
      await expectError(await execute(h, second.key, { payload: 5, conversation_id: run.conversation_id }), 422, "validation_error");
    });
  });

  describe("order of checks on history", () => {
    it("the key is checked before the conversation", async () => {
      await expectError(await history(h, null, crypto.randomUUID()), 401, "missing_api_key");
    });

    it("the channel state is checked before the conversation", async () => {
      const channel = await h.channel({ flow: "echo" });
      const run = await runJson(h, channel.key, { payload: "hi" });
      await h.update(channel, { state: "inactive" });
      await expectError(await history(h, channel.key, run.conversation_id), 409, "channel_inactive");
    });

    it("a bad query is a 422 before an unknown conversation is a 404", async () => {
      const channel = await h.channel({ flow: "echo" });
      const id = crypto.randomUUID();
      await expectError(await history(h, channel.key, id, { limit: "0" }), 422, "validation_error");
      await expectNoConversation(await history(h, channel.key, id, { limit: "10" }), id);
    });
  });
}
