import { type ChannelService, createChannelService, liveChatWebhookBridge, signRequestBody } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres, postgresTestStore, sqliteTestStore, type TestStore } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

const SECRET = "bridge-secret-0123456789abcdef";

/**
 * The live-chat bridge's inbound route reads `X-Channelkit-Signature`, not execute's
 * `X-Service-Signature`: its refusals must name the header a receiver has to send.
 */
function bridgeSignatureTests(name: string, open: () => Promise<TestStore>) {
  describe(`the live-chat bridge's signature refusals: ${name}`, () => {
    let store: TestStore;
    let service: ChannelService;
    let server: RunningServer;
    let conversationId: string;

    beforeAll(async () => {
      store = await open();
      service = await createChannelService({
        storage: store.storage,
        flows: demoFlows,
        logger: { warn() {}, error() {} },
        // Nothing listens there: no delivery is awaited by these cases.
        livechat: liveChatWebhookBridge({ url: "http://127.0.0.1:9/events", secret: SECRET, retry: { attempts: 1 } }),
      });
      server = await serve(service, { port: 0 });
      const { tenant } = await service.admin.createTenant({ name: "desk" });
      const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
      const response = await fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ payload: "hello", stream: false }),
      });
      conversationId = ((await response.json()) as { conversation_id: string }).conversation_id;
    });

    afterAll(async () => {
      await server?.close();
      await service?.close();
      await store?.dispose();
    });

    const inbound = async (signature?: string) => {
      const body = JSON.stringify({ type: "closed", conversation_id: conversationId });
      const headers: Record<string, string> = { "content-type": "application/json", ...(signature ? { "x-channelkit-signature": signature } : {}) };
      const response = await fetch(`${server.url}/api/v1/livechat/bridge/events`, { method: "POST", headers, body });
      expect(response.status).toBe(401);
      return ((await response.json()) as { error: { code: string; message: string } }).error;
    };

    it("an unsigned or wrongly signed event is refused naming X-Channelkit-Signature, never X-Service-Signature", async () => {
      const unsigned = await inbound();
      expect(unsigned.code).toBe("signature_required");
      expect(unsigned.message).toContain("X-Channelkit-Signature");
      expect(unsigned.message).not.toContain("X-Service-Signature");
      const body = JSON.stringify({ type: "closed", conversation_id: conversationId });
      const wrong = await inbound(await signRequestBody("another-secret-0123456789", body));
      expect(wrong.code).toBe("invalid_signature");
      expect(wrong.message).toContain("X-Channelkit-Signature");
      expect(wrong.message).not.toContain("X-Service-Signature");
    });
  });
}

bridgeSignatureTests("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => bridgeSignatureTests("Postgres", () => postgresTestStore(serverUrl)));
