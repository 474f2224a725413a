import Stripe from "stripe";
import { describe, expect, it } from "vitest";
import { execute, expectAccepted, expectError, readHistory } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";
import { digest, nowSeconds, signatureHeader, startOfFreshSecond } from "./signing.js";
import { readSse, streamedText } from "./sse.js";
import { fetch } from "./conformance.js";

const stripe = new Stripe("sk_test_x");

/** A channel that requires signatures, with its secret. */
async function signedChannel(h: Harness): Promise<TestChannel & { signingSecret: string }> {
  const channel = await h.channel({ flow: "echo", requireSignature: true });
  if (channel.signingSecret === null) throw new Error("createChannel returned no signing secret");
  expect(channel.view.has_signing_secret).toBe(true);
  expect(channel.view.config.require_signature).toBe(true);
  return { ...channel, signingSecret: channel.signingSecret };
}

/** Sends `raw` exactly as signed and returns the response. */
function sendSigned(h: Harness, channel: TestChannel, raw: string, signature: string): Promise<Response> {
  return execute(h, channel.key, raw, { signature });
}

/** The optional HMAC request signature on execute. */
export function signatureTests(h: Harness): void {
  describe("HMAC request signature", () => {
    const body = JSON.stringify({ payload: "signed hello", stream: false });

    it("a signature made by hand with HMAC-SHA256 over `t.body` is accepted", async () => {
      const channel = await signedChannel(h);
      await expectAccepted(await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body)));
    });

    it("a signature made by stripe-node's generateTestHeaderString is accepted", async () => {
      const channel = await signedChannel(h);
      const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret: channel.signingSecret, timestamp: nowSeconds() });
      await expectAccepted(await sendSigned(h, channel, body, header));
    });

    it("a signed streamed execute is accepted", async () => {
      const channel = await signedChannel(h);
      const raw = JSON.stringify({ payload: "signed stream", stream: true });
      const response = await sendSigned(h, channel, raw, signatureHeader(channel.signingSecret, raw));
      expect(response.status).toBe(200);
      expect(streamedText((await readSse(response)).events)).toBe("Echo: signed stream");
    });

    it("the exact raw bytes are signed: unusual spacing and key order pass, the re-serialized body fails", async () => {
      const channel = await signedChannel(h);
      const raw = '{ "stream" :false ,\n\t"metadata":{"b":1 , "a":2},   "payload" : "spaced"   }';
      const header = signatureHeader(channel.signingSecret, raw);
      await expectAccepted(await sendSigned(h, channel, raw, header));
      const reserialized = JSON.stringify(JSON.parse(raw));
      await expectError(await sendSigned(h, channel, reserialized, header), 401, "invalid_signature");
    });

    it("a body with non-ASCII characters is signed over its UTF-8 bytes", async () => {
      const channel = await signedChannel(h);
      const raw = JSON.stringify({ payload: "héllo wörld 😀 こんにちは", stream: false });
      const run = await sendSigned(h, channel, raw, signatureHeader(channel.signingSecret, new TextEncoder().encode(raw)));
      expect(run.status, await run.clone().text()).toBe(200);
      expect(((await run.json()) as { output: { result: unknown } }).output.result).toEqual({ echo: "héllo wörld 😀 こんにちは", turn: 1 });
    });

    it("several v1 entries are accepted when one matches; other schemes are ignored", async () => {
      const channel = await signedChannel(h);
      const t = nowSeconds();
      const good = digest(channel.signingSecret, t, body);
      const wrong = digest("another secret", t, body);
      await expectAccepted(await sendSigned(h, channel, body, `t=${t},v1=${wrong},v1=${good}`));
      await expectAccepted(await sendSigned(h, channel, body, `t=${t},v0=${wrong},v1=${good}`));
      // An entry that is not a digest at all matches nothing, and does not spoil the one that matches.
      await expectAccepted(await sendSigned(h, channel, body, `t=${t},v1=00,v1=${good}`));
      await expectAccepted(await sendSigned(h, channel, body, `t=${t},v1=${good},v1=not-hex`));
    });

    it("401 signature_required when the header is absent", async () => {
      const channel = await signedChannel(h);
      await expectError(await execute(h, channel.key, body), 401, "signature_required");
    });

    it.each([
      ["not key=value pairs", () => "garbage"],
      ["no v1", () => `t=${nowSeconds()}`],
      ["no t", () => `v1=${"a".repeat(64)}`],
      ["a non-numeric t", () => `t=yesterday,v1=${"a".repeat(64)}`],
      ["a v1 that is not hex", () => `t=${nowSeconds()},v1=${"z".repeat(64)}`],
      ["a truncated v1", () => `t=${nowSeconds()},v1=abc123`],
    ])("401 invalid_signature for a malformed header: %s", async (_name, header) => {
      const channel = await signedChannel(h);
      await expectError(await sendSigned(h, channel, body, header()), 401, "invalid_signature");
    });

    it("401 invalid_signature for a digest made with another secret", async () => {
      const channel = await signedChannel(h);
      await expectError(await sendSigned(h, channel, body, signatureHeader("svc_sig_not_the_secret", body)), 401, "invalid_signature");
    });

    it("401 invalid_signature when the digest covers another timestamp than t", async () => {
      const channel = await signedChannel(h);
      const t = nowSeconds();
      await expectError(await sendSigned(h, channel, body, `t=${t},v1=${digest(channel.signingSecret, t - 1, body)}`), 401, "invalid_signature");
    });

    it("the window is 300 seconds either side: now-299 and now+299 pass, now-301 and now+301 are signature_expired", async () => {
      const channel = await signedChannel(h);
      await startOfFreshSecond();
      const now = nowSeconds();
      await expectAccepted(await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body, now - 299)));
      await expectAccepted(await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body, now + 299)));
      await expectError(await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body, now - 301)), 401, "signature_expired");
      await expectError(await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body, now + 301)), 401, "signature_expired");
    });

    it("the digest is checked before the window: a stale signature with a wrong digest is invalid_signature", async () => {
      const channel = await signedChannel(h);
      const stale = nowSeconds() - 3600;
      await expectError(await sendSigned(h, channel, body, signatureHeader("wrong secret", body, stale)), 401, "invalid_signature");
      await expectError(await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body, stale)), 401, "signature_expired");
    });

    it("rotating the signing secret invalidates the previous one at once", async () => {
      const channel = await signedChannel(h);
      const rotated = await h.target.admin.rotateSigningSecret(channel.id);
      expect(rotated.channel).toEqual({ id: channel.id, has_signing_secret: true });
      expect(rotated.signing_secret).not.toBe(channel.signingSecret);
      await expectError(await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body)), 401, "invalid_signature");
      await expectAccepted(await sendSigned(h, channel, body, signatureHeader(rotated.signing_secret, body)));
    });

    it("turning require_signature on returns a one-time signing secret that works; turning it off keeps the secret", async () => {
      const channel = await h.channel({ flow: "echo" });
      expect(channel.signingSecret).toBeNull();
      expect(channel.view.has_signing_secret).toBe(false);
      const on = await h.update(channel, { requireSignature: true });
      expect(on.channel.config.require_signature).toBe(true);
      expect(on.channel.has_signing_secret).toBe(true);
      const secret = on.signing_secret;
      if (typeof secret !== "string" || secret.length === 0) throw new Error("no signing_secret when require_signature went false -> true");
      await expectError(await execute(h, channel.key, body), 401, "signature_required");
      await expectAccepted(await sendSigned(h, channel, body, signatureHeader(secret, body)));

      const again = await h.update(channel, { requireSignature: true });
      expect(again.signing_secret).toBeUndefined();

      const off = await h.update(channel, { requireSignature: false });
      expect(off.signing_secret).toBeUndefined();
      expect(off.channel.config.require_signature).toBe(false);
      expect(off.channel.has_signing_secret).toBe(true);
      await expectAccepted(await execute(h, channel.key, body));
    });

    it("the history route requires no signature, even when execute does", async () => {
      const channel = await signedChannel(h);
      const response = await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body));
      const run = (await response.json()) as { conversation_id: string };
      const history = await readHistory(h, channel.key, run.conversation_id);
      expect(history.messages.map((message) => message.content)).toEqual(["signed hello", "Echo: signed hello"]);
    });

    it("the routes that stop a run or end a live chat need the signature too, over their empty body", async () => {
      const channel = await signedChannel(h);
      const response = await sendSigned(h, channel, body, signatureHeader(channel.signingSecret, body));
      const { conversation_id: id } = (await response.json()) as { conversation_id: string };
      const post = (path: string, signature?: string) =>
        fetch(h.url(path), { method: "POST", headers: { authorization: `Bearer ${channel.key}`, ...(signature ? { "x-service-signature": signature } : {}) } });
      for (const path of [`/public/v1/api/conversations/${id}/cancel`, `/public/v1/api/conversations/${id}/livechat/cancel`]) {
        await expectError(await post(path), 401, "signature_required");
        await expectError(await post(path, signatureHeader("another secret", "")), 401, "invalid_signature");
      }
      // Signed over the empty body, they run as they do on other channels: nothing to stop, no live chat to end.
      expect((await post(`/public/v1/api/conversations/${id}/cancel`, signatureHeader(channel.signingSecret, ""))).status).toBe(204);
      await expectError(await post(`/public/v1/api/conversations/${id}/livechat/cancel`, signatureHeader(channel.signingSecret, "")), 409, "livechat_conflict");
    });

    it("the widget chat's cancel needs the signature too on a publishable channel that requires one", async () => {
      const app = "https://app.example";
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [app], requireSignature: true });
      const secret = channel.signingSecret as string;
      const path = `/public/widget/chat/${crypto.randomUUID()}/cancel`;
      const post = (signature?: string) =>
        fetch(h.url(path), {
          method: "POST",
          headers: { authorization: `Bearer ${channel.key}`, origin: app, ...(signature ? { "x-service-signature": signature } : {}) },
        });
      await expectError(await post(), 401, "signature_required");
      await expectError(await post(signatureHeader("another secret", "")), 401, "invalid_signature");
      // Signed over the empty body: a chat that never ran has nothing to stop.
      expect((await post(signatureHeader(secret, ""))).status).toBe(204);
    });

    it("503 signing_secret_unavailable when a signature is required but no secret is stored", async () => {
      const channel = await h.channel({ flow: "echo" });
      // The admin API always issues a secret with the flag, so the flag alone is written to storage.
      await h.target.storage.updateChannel(channel.id, { requireSignature: true }, new Date().toISOString());
      await expectError(await execute(h, channel.key, body, { signature: signatureHeader("anything", body) }), 503, "signing_secret_unavailable");
      await expectError(await execute(h, channel.key, body), 503, "signing_secret_unavailable");
    });

    it("a signed request still goes through every later check", async () => {
      const channel = await signedChannel(h);
      const raw = JSON.stringify({ payload: "x", conversation_id: crypto.randomUUID() });
      await expectError(await sendSigned(h, channel, raw, signatureHeader(channel.signingSecret, raw)), 404, "conversation_not_found");
    });
  });
}
