import { randomUUID } from "node:crypto";
import { type ChannelService, createChannelService, type LiveChatService, memoryStorage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type RunningServer, serve } from "@channelkit/node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { cancelLiveChat, type Connection, type LiveChatMode, startChat } from "./api.js";
import { followLiveChat } from "./livechat.js";
import { readReply } from "./stream.js";

/*
 * The subscription as the widget reads it, against a real service on 127.0.0.1 (memory
 * storage, the `handover` demo flow): the human side is played by a provider holding the
 * service's `ctx.livechat`, as the inbox and the webhook bridge do.
 */

let service: ChannelService;
let server: RunningServer;
let live: LiveChatService;
let connection: Connection;

beforeAll(async () => {
  service = await createChannelService({
    storage: memoryStorage(),
    flows: demoFlows,
    secretKey: "cd".repeat(32),
    livechat: {
      id: "test-desk",
      init(ctx) {
        live = ctx.livechat;
      },
    },
  });
  server = await serve(service, { port: 0 });
  const { tenant } = await service.admin.createTenant({ name: "Shop" });
  const created = await service.admin.createChannel({ tenantId: tenant.id, mode: "public", allowedOrigins: ["https://shop.example"], flow: "handover" });
  connection = { endpoint: server.url, key: created.api_key };
});

afterAll(async () => {
  await server?.close();
  await service?.close();
});

/** Sends `payload` through the widget's chat route, as the widget does; the conversation's id. */
async function say(payload: string, conversationId?: string): Promise<string> {
  const body = await startChat(connection, conversationId ? { payload, conversation_id: conversationId } : { payload }, new AbortController().signal);
  let id = "";
  await readReply(body, {
    conversation: (value) => {
      id = value;
    },
    start: () => {},
    delta: () => {},
  });
  return id;
}

/** Follows a conversation, recording what the handlers are told. */
function follow(conversationId: string, afterTurn: number | null = null) {
  const modes: LiveChatMode[] = [];
  const messages: { turn: number; sender: string; content: string }[] = [];
  const controller = new AbortController();
  const done = followLiveChat(
    connection,
    conversationId,
    afterTurn,
    { mode: (mode) => modes.push(mode), message: (message) => messages.push(message) },
    controller.signal,
  );
  return { modes, messages, done, stop: () => controller.abort() };
}

const modeNames = (modes: LiveChatMode[]) => modes.map((mode) => mode.mode);

describe("followLiveChat", () => {
  it("reports the mode first and each change, the human side's messages in order, never the user's own", async () => {
    const id = await say("I want a human");
    const followed = follow(id);
    await vi.waitFor(() => expect(modeNames(followed.modes)).toEqual(["livechat_waiting"]));
    expect(followed.modes[0]?.statusMessage).toBeNull();

    await live.accept(id);
    await vi.waitFor(() => expect(modeNames(followed.modes)).toEqual(["livechat_waiting", "livechat_active"]));
    const hello = await live.send(id, { content: "Hello, I am Ann", sender: "agent" });
    await say("My parcel is late", id);
    await live.send(id, { content: "Ann is back in a minute", sender: "system" });
    await vi.waitFor(() => expect(followed.messages).toHaveLength(2));
    expect(followed.messages).toEqual([
      { turn: hello.turn_index, sender: "agent", content: "Hello, I am Ann" },
      { turn: hello.turn_index + 2, sender: "system", content: "Ann is back in a minute" },
    ]);

    await live.close(id);
    await vi.waitFor(() => expect(modeNames(followed.modes).at(-1)).toBe("livechat_closed"));
    followed.stop();
    await followed.done;
  });

  it("replays what came after the turn it is given, once", async () => {
    const id = await say("I want a human");
    await live.accept(id);
    const first = await live.send(id, { content: "First", sender: "agent" });
    await live.send(id, { content: "Second", sender: "supervisor" });
    const followed = follow(id, first.turn_index);
    await vi.waitFor(() => expect(followed.messages.map((message) => message.content)).toEqual(["Second"]));
    expect(followed.messages[0]?.sender).toBe("supervisor");
    expect(modeNames(followed.modes)).toEqual(["livechat_active"]);
    followed.stop();
    await followed.done;
  });

  it("reconnects when the connection drops, from the last turn it saw: what was said meanwhile arrives, nothing twice", async () => {
    const id = await say("I want a human");
    await live.accept(id);
    const followed = follow(id);
    await vi.waitFor(() => expect(modeNames(followed.modes)).toEqual(["livechat_active"]));
    await live.send(id, { content: "Before the drop", sender: "agent" });
    await vi.waitFor(() => expect(followed.messages).toHaveLength(1));

    // Every open connection cut, the server still listening: the widget's network blinked.
    server.server.closeAllConnections();
    await live.send(id, { content: "During the drop", sender: "agent" });
    await vi.waitFor(() => expect(followed.messages.map((message) => message.content)).toEqual(["Before the drop", "During the drop"]), { timeout: 5000 });
    // The reconnection starts with the mode again.
    expect(modeNames(followed.modes)).toEqual(["livechat_active", "livechat_active"]);

    await live.send(id, { content: "After the drop", sender: "agent" });
    await vi.waitFor(() => expect(followed.messages.map((message) => message.content)).toEqual(["Before the drop", "During the drop", "After the drop"]));
    followed.stop();
    await followed.done;
  });

  it("ends when aborted, and on a refusal (a conversation the service does not know) without retrying", async () => {
    const followed = follow(await say("I want a human"));
    await vi.waitFor(() => expect(followed.modes).toHaveLength(1));
    followed.stop();
    await expect(followed.done).resolves.toBeUndefined();

    // Following again would be refused again: it ends rather than retrying with backoff.
    const unknown = follow(randomUUID());
    const outcome = await Promise.race([unknown.done.then(() => "ended"), new Promise((resolve) => setTimeout(resolve, 3000, "still following"))]);
    unknown.stop();
    expect(outcome).toBe("ended");
    expect(unknown.modes).toEqual([]);
  });
});

describe("cancelLiveChat", () => {
  it("leaves the queue, answers the mode it is in now; nothing left to cancel is livechat_conflict", async () => {
    const id = await say("I want a human");
    const signal = new AbortController().signal;
    expect(await cancelLiveChat(connection, id, signal)).toEqual({ mode: "livechat_cancelled", statusMessage: null });
    await expect(cancelLiveChat(connection, id, signal)).rejects.toMatchObject({ status: 409, code: "livechat_conflict" });
    // After a cancelled live chat the bot has the conversation again: the flow hands over anew.
    await say("Again", id);
    expect(await cancelLiveChat(connection, id, signal)).toMatchObject({ mode: "livechat_cancelled" });
  });
});
