import { OPENAPI_PATH, type OpenApiDocument } from "@channelkit/core";
import { describe, expect, it } from "vitest";
import { coreOpenApiDocument } from "./conformance.js";
import { fetch } from "./conformance.js";
import type { Harness } from "./harness.js";

/** The routes the suite calls, each of which the served document must describe (the admin and inbox plugins' included). */
const CALLED = [
  "/public/v1/api/execute",
  "/public/v1/api/conversations/{session_id}/messages",
  "/public/v1/api/conversations/{session_id}/events",
  "/public/v1/api/conversations/{session_id}/livechat/cancel",
  "/public/v1/api/conversations/{session_id}/stream",
  "/public/v1/api/conversations/{session_id}/cancel",
  "/public/widget/config",
  "/public/widget/chat",
  "/public/widget/chat/{chat_id}/stream",
  "/public/widget/chat/{chat_id}/cancel",
  "/channels/webhook/{client_id}/startConversation",
  "/channels/webhook/{client_id}/newMessage",
  "/api/v1/channels/{channel_id}",
  "/api/v1/channels/{channel_id}/rotate-key",
  "/api/v1/channels/{channel_id}/rotate-signing-secret",
  "/api/v1/audit",
  "/api/v1/livechat/conversations",
  "/api/v1/livechat/conversations/{conversation_id}",
  "/api/v1/livechat/feed",
  OPENAPI_PATH,
];

/** The OpenAPI document the service serves (its answers are checked against the whole document by every test). */
export function openApiTests(h: Harness): void {
  describe("the OpenAPI document", () => {
    it("is served at GET /public/v1/openapi.json: the routes the service mounts, its plugins' included, each operation as coreOpenApiDocument() describes it", async () => {
      const response = await fetch(h.url(OPENAPI_PATH), { headers: { origin: "https://docs.example" } });
      expect(response.status).toBe(200);
      expect(response.headers.get("access-control-allow-origin")).toBe("https://docs.example");
      const served = (await response.json()) as OpenApiDocument;
      const whole = coreOpenApiDocument();
      expect(served.openapi).toBe("3.1.1");
      expect(served.components).toEqual(JSON.parse(JSON.stringify(whole.components)));
      expect(Object.keys(served.paths)).toEqual(expect.arrayContaining(CALLED));
      for (const [path, item] of Object.entries(served.paths)) {
        const described = whole.paths[path] ?? {};
        const operations = Object.fromEntries(Object.keys(item).map((method) => [method, described[method]]));
        expect(item, path).toEqual(JSON.parse(JSON.stringify(operations)));
      }
      // The plugins' routes, marked with their plugin's id.
      const marked = (path: string, method: string) =>
        (served.paths[path]?.[method] as { "x-channelkit-plugin"?: string } | undefined)?.["x-channelkit-plugin"];
      expect(marked("/api/v1/audit", "get")).toBe("admin");
      expect(marked("/api/v1/livechat/feed", "get")).toBe("livechat-inbox");
      expect(marked("/public/v1/api/execute", "post")).toBeUndefined();
    });
  });
}
