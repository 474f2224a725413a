import { describe, expect, it } from "vitest";
import { adminFetch, channelAdminPath, tokenFor } from "./admin-client.js";
import { webhookPost } from "./webhook.js";
import { type Body, execute, expectError, runJson } from "./client.js";
import type { Harness } from "./harness.js";

const MIB = 1024 * 1024;

/** A JSON body of exactly `size` bytes that is otherwise a valid execute request. */
export function paddedBody(size: number): string {
  const empty = JSON.stringify({ payload: "padded", stream: false, pad: "" });
  if (size < empty.length) throw new Error(`A padded body needs at least ${empty.length} bytes`);
  return JSON.stringify({ payload: "padded", stream: false, pad: "x".repeat(size - empty.length) });
}

/** A chunked body (no Content-Length) of `size` bytes, sent in 1 KiB pieces. */
function chunkedBody(size: number): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(paddedBody(size));
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + 1024));
      offset += 1024;
    },
  });
}

/** 415 `unsupported_media_type`, 413 `payload_too_large` and 422 `validation_error` on execute. */
export function bodyTests(h: Harness): void {
  describe("request body", () => {
    it("415 unsupported_media_type for multipart/form-data", async () => {
      const channel = await h.channel({ flow: "echo" });
      const form = new FormData();
      form.set("payload", "hello");
      await expectError(await execute(h, channel.key, form), 415, "unsupported_media_type");
    });

    it("415 unsupported_media_type for text/plain, form-urlencoded and no Content-Type at all", async () => {
      const channel = await h.channel({ flow: "echo" });
      const json = JSON.stringify({ payload: "hello" });
      await expectError(await execute(h, channel.key, json, { contentType: "text/plain" }), 415, "unsupported_media_type");
      await expectError(await execute(h, channel.key, "payload=hello", { contentType: "application/x-www-form-urlencoded" }), 415, "unsupported_media_type");
      await expectError(await execute(h, channel.key, new TextEncoder().encode(json), { contentType: null }), 415, "unsupported_media_type");
    });

    it("application/json with parameters, in any case, is accepted", async () => {
      const channel = await h.channel({ flow: "echo" });
      for (const contentType of ["application/json; charset=utf-8", "Application/JSON;charset=UTF-8"]) {
        const response = await execute(h, channel.key, JSON.stringify({ payload: "hi", stream: false }), { contentType });
        expect(response.status, await response.clone().text()).toBe(200);
        expect(((await response.json()) as { status: string }).status).toBe("success");
      }
    });

    it("413 payload_too_large for a body over 1 MiB by default; exactly 1 MiB is accepted", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, channel.key, paddedBody(MIB + 1)), 413, "payload_too_large");
      const response = await execute(h, channel.key, paddedBody(MIB));
      expect(response.status).toBe(200);
      expect(((await response.json()) as { output: { result: unknown } }).output.result).toEqual({ echo: "padded", turn: 1 });
    });

    const invalid: [string, Body][] = [
      ["invalid JSON", '{"payload": "hello"'],
      ["a JSON array", "[]"],
      ["JSON null", "null"],
      ["a JSON string", '"hello"'],
      ["a missing payload", { stream: false }],
      ["a null payload", { payload: null }],
      ["a numeric payload", { payload: 42 }],
      ["an empty payload", { payload: "" }],
      ["a payload of 10001 ASCII characters", { payload: "a".repeat(10_001) }],
      ["a payload of 10001 code points outside the BMP", { payload: "😀".repeat(10_001) }],
      ["a conversation_id that is not a UUID", { payload: "hi", conversation_id: "conversation-1" }],
      ["a numeric conversation_id", { payload: "hi", conversation_id: 12 }],
      ["metadata that is an array", { payload: "hi", metadata: [1, 2] }],
      ["metadata that is a string", { payload: "hi", metadata: "context" }],
      ["stream that is a string", { payload: "hi", stream: "true" }],
      ["stream that is a number", { payload: "hi", stream: 1 }],
      ["bytes that are not UTF-8", new Uint8Array([0x7b, 0x22, 0x70, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
    ];
    it.each(invalid)("422 validation_error for %s", async (_name, body) => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, channel.key, body), 422, "validation_error");
    });

    it("a payload of 10000 code points outside the BMP is accepted (length counts code points)", async () => {
      const channel = await h.channel({ flow: "echo" });
      const payload = "😀".repeat(10_000);
      const run = await runJson(h, channel.key, { payload });
      expect(run.status).toBe("success");
      expect(run.output.result).toEqual({ echo: payload, turn: 1 });
    });

    it("unknown body fields are ignored; metadata may be any object", async () => {
      const channel = await h.channel({ flow: "echo" });
      const run = await runJson(h, channel.key, { payload: "hi", extra: { nested: true }, user_id: 7, metadata: { locale: "fr", n: [1] } });
      expect(run.status).toBe("success");
    });
  });
}

/** Tests run on a target started with a small `maxBodyBytes`. */
export function bodyLimitTests(h: Harness, maxBodyBytes: number): void {
  describe(`configured body limit (${maxBodyBytes} bytes)`, () => {
    it("a body of exactly the limit is accepted", async () => {
      const channel = await h.channel({ flow: "echo" });
      const response = await execute(h, channel.key, paddedBody(maxBodyBytes));
      expect(response.status, await response.clone().text()).toBe(200);
    });

    it("413 payload_too_large one byte over the limit", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, channel.key, paddedBody(maxBodyBytes + 1)), 413, "payload_too_large");
    });

    it("413 payload_too_large for a chunked body without Content-Length", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, channel.key, chunkedBody(maxBodyBytes * 16)), 413, "payload_too_large");
    });

    it("a chunked body within the limit is accepted", async () => {
      const channel = await h.channel({ flow: "echo" });
      const response = await execute(h, channel.key, chunkedBody(maxBodyBytes));
      expect(response.status, await response.clone().text()).toBe(200);
    });

    it("the webhook routes and the admin PATCH hold the same limit", async () => {
      const channel = await h.channel({ flow: "echo", type: "webhook" });
      const clientId = (channel.view as { client_id: string }).client_id;
      const over = JSON.stringify({ language: "en_US", integrationContext: { pad: "x".repeat(maxBodyBytes) } });
      for (const route of ["startConversation", "newMessage"] as const) {
        await expectError(await webhookPost(h, clientId, route, over), 413, "payload_too_large");
      }
      const token = await tokenFor(h, channel.tenantId);
      const patch = await adminFetch(h, "PATCH", channelAdminPath(channel.id), { tenant: channel.tenantId, token, body: { name: "x".repeat(maxBodyBytes) } });
      await expectError(patch, 413, "payload_too_large");
    });
  });
}
