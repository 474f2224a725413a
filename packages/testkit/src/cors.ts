import { describe, expect, it } from "vitest";
import { EXECUTE_PATH, execute, expectError, history, historyPath, runJson, unknownKey } from "./client.js";
import type { Harness } from "./harness.js";
import { readSse } from "./sse.js";
import { fetch } from "./conformance.js";

const APP = "https://app.example.com";

/** Asserts the CORS headers of a response to a request with `Origin: origin`. */
function expectReflected(response: Response, origin: string): void {
  expect(response.headers.get("access-control-allow-origin")).toBe(origin);
  const vary = (response.headers.get("vary") ?? "").split(",").map((name) => name.trim().toLowerCase());
  expect(vary).toContain("origin");
  expect(response.headers.get("access-control-allow-credentials")).toBeNull();
}

function preflight(h: Harness, path: string, method: string, origin: string, requestHeaders = "authorization,content-type"): Promise<Response> {
  return fetch(h.url(path), {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": requestHeaders,
    },
  });
}

/** CORS: the preflight, and the reflected origin on every answer. */
export function corsTests(h: Harness): void {
  describe("CORS", () => {
    it("the execute preflight needs no authentication and answers exactly the contract's headers", async () => {
      const response = await preflight(h, EXECUTE_PATH, "POST", APP);
      expect(response.status).toBeGreaterThanOrEqual(200);
      expect(response.status).toBeLessThan(300);
      expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type");
      expect(response.headers.get("access-control-allow-methods")).toBe("POST, OPTIONS");
      expectReflected(response, APP);
      expect(await response.text()).toBe("");
      // Without Access-Control-Request-Headers too.
      const bare = await fetch(h.url(EXECUTE_PATH), { method: "OPTIONS", headers: { origin: APP, "access-control-request-method": "POST" } });
      expect(bare.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type");
    });

    it("the execute preflight allows Idempotency-Key when the browser asks to send one (our extension), and varies on what is asked", async () => {
      const response = await preflight(h, EXECUTE_PATH, "POST", APP, "authorization,content-type,idempotency-key");
      expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, Idempotency-Key");
      expect(response.headers.get("vary")).toMatch(/Access-Control-Request-Headers/i);
      expectReflected(response, APP);
    });

    it("the preflights of the routes that take a signature allow X-Service-Signature: the cancels, the widget's chat, and execute when asked", async () => {
      const id = crypto.randomUUID();
      for (const path of [
        `/public/v1/api/conversations/${id}/cancel`,
        `/public/v1/api/conversations/${id}/livechat/cancel`,
        "/public/widget/chat",
        `/public/widget/chat/${id}/cancel`,
      ]) {
        const response = await preflight(h, path, "POST", APP, "authorization,x-service-signature");
        expect(response.status).toBe(204);
        expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, X-Service-Signature");
        expectReflected(response, APP);
      }
      const signed = await preflight(h, EXECUTE_PATH, "POST", APP, "authorization,content-type,x-service-signature");
      expect(signed.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, X-Service-Signature");
      const both = await preflight(h, EXECUTE_PATH, "POST", APP, "X-Service-Signature, Idempotency-Key, Authorization");
      expect(both.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, Idempotency-Key, X-Service-Signature");
    });

    it("the preflight reflects whatever origin asks (the key's allowed origins decide later)", async () => {
      const origin = "https://unknown.example.org";
      expectReflected(await preflight(h, EXECUTE_PATH, "POST", origin), origin);
    });

    it("the history route answers its preflight too, so browsers can read history with a public key", async () => {
      const response = await preflight(h, historyPath(crypto.randomUUID()), "GET", APP);
      expect(response.status).toBeGreaterThanOrEqual(200);
      expect(response.status).toBeLessThan(300);
      expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type");
      expect(
        response.headers
          .get("access-control-allow-methods")
          ?.split(",")
          .map((m) => m.trim()),
      ).toContain("GET");
      expectReflected(response, APP);
    });

    it("a successful JSON execute reflects the origin", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      const response = await execute(h, channel.key, { payload: "hi", stream: false }, { origin: APP });
      expect(response.status).toBe(200);
      expectReflected(response, APP);
      await response.body?.cancel();
    });

    it("a streamed execute reflects the origin", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      const response = await execute(h, channel.key, { payload: "hi", stream: true }, { origin: APP });
      expect(response.status).toBe(200);
      expectReflected(response, APP);
      expect((await readSse(response)).events.at(-1)?.type).toBe("finish");
    });

    it("error responses reflect the origin, including origin_not_allowed itself", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      const evil = "https://evil.example.com";
      const refused = await execute(h, channel.key, { payload: "hi" }, { origin: evil });
      expectReflected(refused, evil);
      await expectError(refused, 403, "origin_not_allowed");

      const unauthenticated = await execute(h, null, { payload: "hi" }, { origin: APP });
      expectReflected(unauthenticated, APP);
      await expectError(unauthenticated, 401, "missing_api_key");

      const invalid = await execute(h, channel.key, { payload: "" }, { origin: APP });
      expectReflected(invalid, APP);
      await expectError(invalid, 422, "validation_error");

      const unknown = await execute(h, unknownKey("svc_pub_"), { payload: "hi" }, { origin: APP });
      expectReflected(unknown, APP);
      await expectError(unknown, 401, "invalid_api_key");
    });

    it("history responses reflect the origin, the 404 included", async () => {
      const channel = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
      const run = await runJson(h, channel.key, { payload: "hi" }, { origin: APP });
      const found = await history(h, channel.key, run.conversation_id, {}, { origin: APP });
      expect(found.status).toBe(200);
      expectReflected(found, APP);
      await found.body?.cancel();
      const missing = await history(h, channel.key, crypto.randomUUID(), {}, { origin: APP });
      expect(missing.status).toBe(404);
      expectReflected(missing, APP);
      await missing.body?.cancel();
    });
  });
}
