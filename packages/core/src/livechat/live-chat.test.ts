import { describe, expect, it } from "vitest";
import type { LiveChatService } from "../context.js";
import { demoFlows } from "../flows/demo.js";
import { createChannelService } from "../service.js";
import { memoryStorage } from "../storage/memory.js";
import type { LiveFeed, Storage } from "../storage/types.js";
import { inProcessFeed } from "./feed.js";
import type { LiveChatProvider } from "./provider.js";

/** A feed that counts its live subscriptions. */
function countingFeed(): LiveFeed & { subscribed: () => number } {
  const feed = inProcessFeed();
  let live = 0;
  return {
    publish: (topic, message) => feed.publish(topic, message),
    async subscribe(topic, listener) {
      const stop = await feed.subscribe(topic, listener);
      live++;
      let stopped = false;
      return () => {
        if (stopped) return;
        stopped = true;
        live--;
        stop();
      };
    },
    close: () => feed.close(),
    subscribed: () => live,
  };
}

/** A service on the memory storage with `provider`, a handover channel, and helpers to talk to it. */
async function setup(provider: LiveChatProvider | undefined, storage: Storage = memoryStorage()) {
  const warnings: unknown[][] = [];
  const service = await createChannelService({
    storage,
    flows: demoFlows,
    logger: { warn: (...args) => warnings.push(args), error: () => undefined },
    ...(provider ? { livechat: provider } : {}),
  });
  const { tenant } = await service.admin.createTenant({ name: "Desk" });
  const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "handover" });
  const call = (path: string, init: RequestInit = {}) =>
    service.handler(
      new Request(`http://test${path}`, { ...init, headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...init.headers } }),
    );
  const execute = async (payload: string, conversationId?: string) =>
    (
      await call("/public/v1/api/execute", {
        method: "POST",
        body: JSON.stringify({ payload, ...(conversationId ? { conversation_id: conversationId } : {}) }),
      })
    ).json() as Promise<{
      conversation_id: string;
      status: string;
    }>;
  return { service, execute, call, warnings };
}

/** Waits until `probe` holds, polling. */
async function until(probe: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe("the live-chat provider's hooks", () => {
  it("are told of the handover with its transcript, then of the user's messages in order, then of a cancel", async () => {
    const told: string[] = [];
    const provider: LiveChatProvider = {
      id: "recorder",
      handover: (event) => void told.push(`handover ${event.transcript.map((m) => m.content).join(" | ")}`),
      userMessage: (event) => void told.push(`message ${event.message.content} (${event.message.origin}, ${event.message.sender})`),
      cancelled: (event) => void told.push(`cancelled ${event.livechatConversationId}`),
    };
    const { service, execute, call } = await setup(provider);
    const { conversation_id: id } = await execute("help me");
    await until(() => told.length === 1);
    await execute("hello?", id);
    await until(() => told.length === 2);
    expect((await call(`/public/v1/api/conversations/${id}/livechat/cancel`, { method: "POST" })).status).toBe(200);
    await until(() => told.length === 3);
    expect(told).toEqual(["handover help me | Connecting you to an agent", "message hello? (livechat, user)", "cancelled null"]);
    await service.close();
  });

  it("a hook that throws is logged and changes nothing stored; available() false or throwing makes the handover unavailable", async () => {
    const failing: LiveChatProvider = {
      id: "flaky",
      handover: () => {
        throw new Error("desk down");
      },
    };
    const first = await setup(failing);
    const run = await first.execute("help");
    expect(run.status).toBe("pending");
    await until(() => first.warnings.some((args) => String(args[0]).includes('"flaky" failed in handover()')));
    const history = await (await first.call(`/public/v1/api/conversations/${run.conversation_id}/messages`)).json();
    expect(history.mode).toBe("livechat_waiting");
    await first.service.close();

    for (const available of [() => false, () => Promise.reject(new Error("no"))]) {
      const closedDesk = await setup({ id: "closed", available });
      const refused = await closedDesk.execute("help");
      expect(refused.status).toBe("success");
      const read = await (await closedDesk.call(`/public/v1/api/conversations/${refused.conversation_id}/messages`)).json();
      expect(read.mode).toBe("livechat_unavailable");
      await closedDesk.service.close();
    }
  });

  it("the provider reports through ctx.livechat: accept with its own id, messages (a retried id stored once), unavailable", async () => {
    let livechat: LiveChatService | undefined;
    const { service, execute, call } = await setup({
      id: "desk",
      init(ctx) {
        livechat = ctx.livechat;
      },
    });
    const desk = livechat as LiveChatService;
    const first = await execute("help");
    const state = await desk.accept(first.conversation_id, { livechatConversationId: "desk-1" });
    expect(state).toMatchObject({ mode: "livechat_active", livechatConversationId: "desk-1" });
    const sent = await desk.send(first.conversation_id, { content: "Hi", sender: "supervisor", livechat_message_id: "m-1" });
    const again = await desk.send(first.conversation_id, { content: "Hi", sender: "supervisor", livechat_message_id: "m-1" });
    expect(again).toEqual(sent);
    const history = await (await call(`/public/v1/api/conversations/${first.conversation_id}/messages`)).json();
    expect(history.messages.filter((m: { livechat_message_id: string }) => m.livechat_message_id === "m-1")).toHaveLength(1);
    const second = await execute("help");
    expect((await desk.unavailable(second.conversation_id)).mode).toBe("livechat_unavailable");
    await expect(desk.unavailable(second.conversation_id)).rejects.toMatchObject({ code: "livechat_conflict" });
    await expect(desk.accept(crypto.randomUUID())).rejects.toMatchObject({ code: "conversation_not_found" });
    await service.close();
  });
});

describe("the user's subscription", () => {
  it("stops listening when its client goes away", async () => {
    const feed = countingFeed();
    const storage = Object.assign(memoryStorage(), { feed });
    const { service, execute, call } = await setup({ id: "desk" }, storage);
    const { conversation_id: id } = await execute("help");
    const response = await call(`/public/v1/api/conversations/${id}/events`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"mode":"livechat_waiting"');
    expect(feed.subscribed()).toBe(1);
    await reader.cancel();
    await until(() => feed.subscribed() === 0);
    await service.close();
  });
});
