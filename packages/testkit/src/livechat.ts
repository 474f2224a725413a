import { EventSourceParserStream } from "eventsource-parser/stream";
import { describe, expect, it } from "vitest";
import { adminFetch, adminOk, tokenFor } from "./admin-client.js";
import { execute, expectError, expectNoConversation, ISO_TIMESTAMP, readHistory, runJson, UUID, waitFor } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";
import { readSse } from "./sse.js";
import { webhookPost } from "./webhook.js";
import { fetch } from "./conformance.js";

const INBOX = "/api/v1/livechat";
const eventsPath = (id: string) => `/public/v1/api/conversations/${encodeURIComponent(id)}/events`;
const cancelPath = (id: string) => `/public/v1/api/conversations/${encodeURIComponent(id)}/livechat/cancel`;
const inboxPath = (id: string, action?: "accept" | "messages" | "close") => `${INBOX}/conversations/${encodeURIComponent(id)}${action ? `/${action}` : ""}`;

/** A channel on the `handover` flow, a token for its tenant's agents, and a conversation handed over. */
async function handedOver(h: Harness, spec: Partial<Parameters<Harness["channel"]>[0]> = {}) {
  const channel = await h.channel({ flow: "handover", ...spec });
  const token = await tokenFor(h, channel.tenantId, { subject: "agent-ann" });
  const run = await runJson(h, channel.key, { payload: "I need a human", stream: false });
  return { channel, token, run, conversationId: run.conversation_id };
}

/** An agent action through the inbox, answered 200. */
function agent(h: Harness, channel: TestChannel, token: string, id: string, action: "accept" | "messages" | "close", body?: unknown) {
  return adminOk(h, "POST", inboxPath(id, action), { token, tenant: channel.tenantId, ...(body === undefined ? {} : { body }) });
}

/** The server-sent events of a response, as they come. */
function eventReader(response: Response) {
  if (!response.body) throw new Error("The response has no body");
  return response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
}

/** A live subscription: events as they come, read with a deadline. */
async function subscribe(h: Harness, key: string, id: string, headers: Record<string, string> = {}) {
  const response = await fetch(h.url(eventsPath(id)), { headers: { authorization: `Bearer ${key}`, ...headers } });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const reader = eventReader(response);
  return {
    /** The next event's JSON and id, within `ms`. */
    async next(ms = 3000): Promise<{ data: any; id: string | undefined }> {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms);
      });
      try {
        const { done, value } = await Promise.race([reader.read(), timeout]);
        if (done) throw new Error("the subscription ended");
        return { data: JSON.parse(value.data), id: value.id };
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => reader.cancel().catch(() => undefined),
  };
}

/** Live chat (decisions.md, "Live chat"): the mode machine over HTTP, the agent inbox, the user's subscription and cancel. */
export function liveChatTests(h: Harness): void {
  describe("live chat", () => {
    it("a handover waits for an agent: the run is pending, history shows the mode, its status message and the live chat's id", async () => {
      const { channel, run, conversationId } = await handedOver(h);
      expect(run.status).toBe("pending");
      expect(run.output.metadata.livechat_mode).toBe("livechat_waiting");
      const before = await readHistory(h, channel.key, conversationId);
      // The live chat gets its id when an agent accepts it (interface.md: the active or closed one).
      expect(before).toMatchObject({ mode: "livechat_waiting", livechat_status_message: null, livechat_conversation_id: null });
      await h.update(channel, { livechatMessages: { livechat_waiting: "An agent will be with you shortly." } });
      expect((await readHistory(h, channel.key, conversationId)).livechat_status_message).toBe("An agent will be with you shortly.");
    });

    it("while waiting, the user's message is stored for the human side and the flow does not run (JSON and streamed)", async () => {
      const { channel, conversationId } = await handedOver(h);
      const json = await runJson(h, channel.key, { payload: "hello?", conversation_id: conversationId, stream: false });
      expect(json).toMatchObject({
        conversation_id: conversationId,
        status: "pending",
        output: { messages: [], metadata: { livechat_mode: "livechat_waiting" } },
      });
      const streamed = await readSse(await execute(h, channel.key, { payload: "still there?", conversation_id: conversationId, stream: true }));
      expect(streamed.events.map((event) => event.type)).toEqual(["data-run", "finish"]);
      const { messages } = await readHistory(h, channel.key, conversationId);
      expect(messages.map((m) => [m.turn_index, m.origin, m.role, m.sender, m.content])).toEqual([
        [0, "agent", "user", null, "I need a human"],
        [1, "agent", "assistant", null, "Connecting you to an agent"],
        [2, "livechat", "user", "user", "hello?"],
        [3, "livechat", "user", "user", "still there?"],
      ]);
      // interface.md: a run's ids are set only when the origin is `agent`.
      for (const message of messages.slice(2)) expect(message).toMatchObject({ run_id: null, step_id: null, node_type: null });
    });

    it("an agent accepts, writes and closes through the inbox; history interleaves bot, user and agent messages in turn order; then the bot resumes", async () => {
      const { channel, token, conversationId } = await handedOver(h);
      const listed = await adminOk(h, "GET", `${INBOX}/conversations?mode=waiting`, { token, tenant: channel.tenantId });
      const entry = listed.conversations.find((c: { conversation_id: string }) => c.conversation_id === conversationId);
      expect(entry).toMatchObject({ channel_id: channel.id, mode: "livechat_waiting" });
      expect(entry.expires_at).toMatch(ISO_TIMESTAMP);

      const accepted = await agent(h, channel, token, conversationId, "accept");
      expect(accepted.conversation).toMatchObject({ conversation_id: conversationId, mode: "livechat_active", expires_at: null });
      expect(accepted.conversation.livechat_conversation_id).toMatch(UUID);
      const sent = await agent(h, channel, token, conversationId, "messages", { content: "Hi, I am Ann. How can I help?" });
      expect(sent.message).toMatchObject({
        origin: "livechat",
        role: "assistant",
        sender: "agent",
        turn_index: 2,
        run_id: null,
        step_id: null,
        node_type: null,
      });
      expect(sent.message.livechat_message_id).toEqual(expect.any(String));
      const reply = await runJson(h, channel.key, { payload: "My order is late", conversation_id: conversationId, stream: false });
      expect(reply).toMatchObject({ status: "pending", output: { messages: [], metadata: { livechat_mode: "livechat_active" } } });
      await agent(h, channel, token, conversationId, "messages", { content: "Transferring you to billing", sender: "system", livechat_message_id: "desk-42" });
      const closed = await agent(h, channel, token, conversationId, "close");
      expect(closed.conversation.mode).toBe("livechat_closed");
      expect(await readHistory(h, channel.key, conversationId)).toMatchObject({ mode: "livechat_closed" });

      // The bot takes the conversation back: bound to echo now, it answers the next message.
      await h.update(channel, { flow: "echo" });
      const back = await runJson(h, channel.key, { payload: "thanks", conversation_id: conversationId, stream: false });
      expect(back.status).toBe("success");
      expect(back.output.messages).toEqual([{ role: "assistant", content: "Echo: thanks" }]);
      const after = await readHistory(h, channel.key, conversationId);
      expect(after.mode).toBe("bot");
      expect(after.livechat_conversation_id).toMatch(UUID);
      expect(after.messages.map((m) => [m.turn_index, m.origin, m.role, m.sender, m.livechat_message_id === null])).toEqual([
        [0, "agent", "user", null, true],
        [1, "agent", "assistant", null, true],
        [2, "livechat", "assistant", "agent", false],
        // The user's message to the human side has an id too: every message of a live chat has one.
        [3, "livechat", "user", "user", false],
        [4, "livechat", "system", "system", false],
        [5, "agent", "user", null, true],
        [6, "agent", "assistant", null, true],
      ]);
      expect(after.messages[4]?.livechat_message_id).toBe("desk-42");
      expect(after.messages[3]?.livechat_message_id).toMatch(UUID);
    });

    it("another tenant's conversation is 404 conversation_not_found to an agent, whatever the body: a repeated livechat_message_id of its desk answers nothing of it, during and after the live chat", async () => {
      const b = await handedOver(h);
      await agent(h, b.channel, b.token, b.conversationId, "accept");
      await agent(h, b.channel, b.token, b.conversationId, "messages", { content: "B's secret answer", livechat_message_id: "desk-b-1" });
      const a = await handedOver(h);
      const probe = () =>
        adminFetch(h, "POST", inboxPath(b.conversationId, "messages"), {
          token: a.token,
          tenant: a.channel.tenantId,
          body: { content: "x", livechat_message_id: "desk-b-1" },
        });
      await expectError(await probe(), 404, "conversation_not_found");
      await agent(h, b.channel, b.token, b.conversationId, "close");
      await expectError(await probe(), 404, "conversation_not_found");
      // B's own agent replaying its message still gets it back, once.
      const replayed = await agent(h, b.channel, b.token, b.conversationId, "messages", { content: "B's secret answer", livechat_message_id: "desk-b-1" });
      expect(replayed.message).toMatchObject({ content: "B's secret answer", livechat_message_id: "desk-b-1" });
      const { messages } = await readHistory(h, b.channel.key, b.conversationId);
      expect(messages.filter((m) => m.livechat_message_id === "desk-b-1")).toHaveLength(1);
      // A new message after the close is refused, as every write after it.
      const late = await adminFetch(h, "POST", inboxPath(b.conversationId, "messages"), {
        token: b.token,
        tenant: b.channel.tenantId,
        body: { content: "too late", livechat_message_id: "desk-b-2" },
      });
      await expectError(late, 409, "livechat_conflict");
    });

    it("the user's subscription sees the mode, the agent's messages and each change of mode live", async () => {
      const { channel, token, conversationId } = await handedOver(h);
      const events = await subscribe(h, channel.key, conversationId);
      try {
        expect((await events.next()).data).toMatchObject({ type: "mode", mode: "livechat_waiting", livechat_status_message: null });
        await agent(h, channel, token, conversationId, "accept", { livechat_conversation_id: "desk-chat-7" });
        expect((await events.next()).data).toEqual({
          type: "mode",
          mode: "livechat_active",
          livechat_status_message: null,
          livechat_conversation_id: "desk-chat-7",
        });
        await agent(h, channel, token, conversationId, "messages", { content: "Hello from Ann" });
        const message = await events.next();
        expect(message.data).toMatchObject({ type: "message", message: { content: "Hello from Ann", sender: "agent", origin: "livechat", turn_index: 2 } });
        expect(message.id).toBe("2");
        await runJson(h, channel.key, { payload: "hi Ann", conversation_id: conversationId, stream: false });
        expect((await events.next()).data).toMatchObject({ type: "message", message: { content: "hi Ann", sender: "user", turn_index: 3 } });
        await agent(h, channel, token, conversationId, "close");
        expect((await events.next()).data).toMatchObject({ type: "mode", mode: "livechat_closed" });
      } finally {
        await events.close();
      }
      // A client that reconnects from a turn gets what came after it.
      const replay = await subscribe(h, channel.key, conversationId, { "last-event-id": "1" });
      try {
        expect((await replay.next()).data).toMatchObject({ type: "mode", mode: "livechat_closed" });
        expect((await replay.next()).data.message).toMatchObject({ turn_index: 2, content: "Hello from Ann" });
        expect((await replay.next()).data.message).toMatchObject({ turn_index: 3, content: "hi Ann" });
      } finally {
        await replay.close();
      }
    });

    it("the agents' feed tells of handovers and user messages", async () => {
      const channel = await h.channel({ flow: "handover" });
      const token = await tokenFor(h, channel.tenantId);
      const response = await fetch(h.url(`${INBOX}/feed`), { headers: { authorization: `Bearer ${token}`, "x-tenant-id": channel.tenantId } });
      expect(response.status).toBe(200);
      const reader = eventReader(response);
      const next = async () => JSON.parse(((await reader.read()).value as { data: string }).data);
      try {
        expect(await next()).toEqual({ type: "ready" });
        const run = await runJson(h, channel.key, { payload: "help", stream: false });
        expect(await next()).toMatchObject({ type: "handover", conversation: { conversation_id: run.conversation_id, mode: "livechat_waiting" } });
        await runJson(h, channel.key, { payload: "anyone?", conversation_id: run.conversation_id, stream: false });
        expect(await next()).toMatchObject({ type: "message", conversation_id: run.conversation_id, message: { content: "anyone?", sender: "user" } });
      } finally {
        await reader.cancel().catch(() => undefined);
      }
    });

    it("the user cancels: waiting → cancelled, the next message goes to the bot; nothing to cancel is a 409", async () => {
      const { channel, conversationId } = await handedOver(h);
      const cancel = () => fetch(h.url(cancelPath(conversationId)), { method: "POST", headers: { authorization: `Bearer ${channel.key}` } });
      const response = await cancel();
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ conversation_id: conversationId, mode: "livechat_cancelled" });
      expect((await readHistory(h, channel.key, conversationId)).mode).toBe("livechat_cancelled");
      await expectError(await cancel(), 409, "livechat_conflict");
      // Back to the bot: the handover flow runs again and hands over again.
      const again = await runJson(h, channel.key, { payload: "please", conversation_id: conversationId, stream: false });
      expect(again).toMatchObject({ status: "pending", output: { metadata: { livechat_mode: "livechat_waiting" } } });
      expect(again.output.messages).toEqual([{ role: "assistant", content: "Connecting you to an agent" }]);
    });

    it("an active live chat can be cancelled by the user too; the agent can then no longer write", async () => {
      const { channel, token, conversationId } = await handedOver(h);
      await agent(h, channel, token, conversationId, "accept");
      const response = await fetch(h.url(cancelPath(conversationId)), { method: "POST", headers: { authorization: `Bearer ${channel.key}` } });
      expect((await response.json()).mode).toBe("livechat_cancelled");
      const late = await adminFetch(h, "POST", inboxPath(conversationId, "messages"), { token, tenant: channel.tenantId, body: { content: "hello?" } });
      await expectError(late, 409, "livechat_conflict");
    });

    it("a wait expires after the channel's timeout, from stored times: history says so, an agent can no longer accept, the bot answers and a new handover waits anew", async () => {
      const channel = await h.channel({ flow: "handover", livechatWaitTimeoutSeconds: 2 });
      const token = await tokenFor(h, channel.tenantId);
      const run = await runJson(h, channel.key, { payload: "help", stream: false });
      const id = run.conversation_id;
      const expired = await waitFor(async () => {
        const { mode } = await readHistory(h, channel.key, id);
        return mode === "livechat_expired" ? mode : null;
      });
      expect(expired).toBe("livechat_expired");
      const listed = await adminOk(h, "GET", `${INBOX}/conversations`, { token, tenant: channel.tenantId });
      expect(listed.conversations.map((c: { conversation_id: string }) => c.conversation_id)).not.toContain(id);
      await expectError(await adminFetch(h, "POST", inboxPath(id, "accept"), { token, tenant: channel.tenantId }), 409, "livechat_conflict");
      const next = await runJson(h, channel.key, { payload: "hello", conversation_id: id, stream: false });
      expect(next.output.messages).toEqual([{ role: "assistant", content: "Connecting you to an agent" }]);
      expect(next.output.metadata.livechat_mode).toBe("livechat_waiting");
      // The flow handed over again: a new wait, which an agent can take.
      const accepted = await agent(h, channel, token, id, "accept");
      expect(accepted.conversation).toMatchObject({ conversation_id: id, mode: "livechat_active" });
      expect((await readHistory(h, channel.key, id)).mode).toBe("livechat_active");
    });

    it("the webhook channel's newMessage and the widget's chat hand the user's message to the human too", async () => {
      const hook = await h.channel({ flow: "handover", type: "webhook" });
      const started = await webhookPost(h, hook.view.client_id as string, "startConversation", { language: "en_US" });
      const conversationId = (await started.json()).conversation.conversation.id as string;
      const first = await webhookPost(h, hook.view.client_id as string, "newMessage", { conversationId, userInput: "agent please" });
      expect((await first.json()).conversation.newEvents).toHaveLength(1);
      const second = await webhookPost(h, hook.view.client_id as string, "newMessage", { conversationId, userInput: "hello?" });
      expect(second.status).toBe(200);
      expect((await second.json()).conversation.newEvents).toEqual([]);

      const widget = await h.channel({ flow: "handover", mode: "public" });
      const chat = (payload: string, conversation_id?: string) =>
        fetch(h.url("/public/widget/chat"), {
          method: "POST",
          headers: { authorization: `Bearer ${widget.key}`, "content-type": "application/json" },
          body: JSON.stringify({ payload, ...(conversation_id ? { conversation_id } : {}) }),
        });
      const opened = await readSse(await chat("human please"));
      const runEvent = opened.events[0] as { type: "data-run"; data: { conversation_id: string } };
      const during = await readSse(await chat("are you there?", runEvent.data.conversation_id));
      expect(during.events.map((event) => event.type)).toEqual(["data-run", "finish"]);
      const { messages } = await readHistory(h, widget.key, runEvent.data.conversation_id);
      expect(messages.at(-1)).toMatchObject({ origin: "livechat", sender: "user", content: "are you there?" });
    });

    it("refuses what does not apply, in the contract's envelope", async () => {
      const { channel, token, conversationId } = await handedOver(h);
      const tenant = channel.tenantId;
      // The inbox is behind the tenant's admin token.
      await expectError(await adminFetch(h, "GET", `${INBOX}/conversations`, { tenant }), 401, "unauthorized");
      await expectError(await adminFetch(h, "GET", `${INBOX}/conversations`, { token }), 401, "missing_tenant");
      const other = await h.channel({ flow: "handover" });
      const otherToken = await tokenFor(h, other.tenantId);
      await expectError(
        await adminFetch(h, "POST", inboxPath(conversationId, "accept"), { token: otherToken, tenant: other.tenantId }),
        404,
        "conversation_not_found",
      );
      await expectError(await adminFetch(h, "POST", inboxPath(crypto.randomUUID(), "accept"), { token, tenant }), 404, "conversation_not_found");
      await expectError(await adminFetch(h, "POST", inboxPath(conversationId, "close"), { token, tenant }), 409, "livechat_conflict");
      await expectError(await adminFetch(h, "POST", inboxPath(conversationId, "messages"), { token, tenant, body: { content: "" } }), 422, "validation_error");
      await expectError(
        await adminFetch(h, "POST", inboxPath(conversationId, "messages"), { token, tenant, body: { content: "x", sender: "user" } }),
        422,
        "validation_error",
      );
      await expectError(await adminFetch(h, "GET", `${INBOX}/conversations?mode=closed`, { token, tenant }), 422, "validation_error");
      await agent(h, channel, token, conversationId, "accept");
      await expectError(await adminFetch(h, "POST", inboxPath(conversationId, "accept"), { token, tenant }), 409, "livechat_conflict");
      // The user's routes: the checks of history, and its 404.
      const unknown = crypto.randomUUID();
      await expectNoConversation(await fetch(h.url(eventsPath(unknown)), { headers: { authorization: `Bearer ${channel.key}` } }), unknown);
      await expectNoConversation(await fetch(h.url(cancelPath(unknown)), { method: "POST", headers: { authorization: `Bearer ${channel.key}` } }), unknown);
      await expectNoConversation(await fetch(h.url(eventsPath(conversationId)), { headers: { authorization: `Bearer ${other.key}` } }), conversationId);
      await expectError(await fetch(h.url(eventsPath(conversationId))), 401, "missing_api_key");
      await expectError(
        await fetch(h.url(`${eventsPath(conversationId)}?after=soon`), { headers: { authorization: `Bearer ${channel.key}` } }),
        422,
        "validation_error",
      );
      // Nothing was half-written: the conversation is still active with its two messages.
      const state = await readHistory(h, channel.key, conversationId);
      expect(state.mode).toBe("livechat_active");
      expect(state.total_messages).toBe(2);
    });

    it("admin settings: status messages per mode and the wait timeout, validated", async () => {
      const channel = await h.channel({ flow: "handover" });
      const token = await tokenFor(h, channel.tenantId);
      const patch = (body: unknown) => adminFetch(h, "PATCH", `/api/v1/channels/${channel.id}`, { token, tenant: channel.tenantId, body });
      const ok = await patch({ livechat: { status_messages: { livechat_active: "You are with an agent." }, wait_timeout_seconds: 120 } });
      expect(ok.status).toBe(200);
      expect((await ok.json()).channel.livechat).toEqual({ status_messages: { livechat_active: "You are with an agent." }, wait_timeout_seconds: 120 });
      await expectError(await patch({ livechat: { status_messages: { waiting: "x" } } }), 422, "validation_error");
      await expectError(await patch({ livechat: { wait_timeout_seconds: 0 } }), 422, "validation_error");
      await expectError(await patch({ livechat: { timeout: 5 } }), 422, "validation_error");
      // The run time limit is a channel setting of the same PATCH.
      const limited = await patch({ run_timeout_seconds: 60 });
      expect((await limited.json()).channel.run_timeout_seconds).toBe(60);
      await expectError(await patch({ run_timeout_seconds: 0 }), 422, "validation_error");
    });
  });
}
