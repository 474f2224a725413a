import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Stripe from "stripe";
import { afterEach, describe, expect, it } from "vitest";
import { signRequestBody } from "../../auth/signature.js";
import { demoFlows } from "../../flows/demo.js";
import { type ChannelService, createChannelService } from "../../service.js";
import { memoryStorage } from "../../storage/memory.js";
import { type LiveChatWebhookBridgeOptions, liveChatWebhookBridge } from "./plugin.js";

const SECRET = "bridge-secret-0123456789abcdef";
const stripe = new Stripe("sk_test_x");

/** An event the receiver got, with whether its signature verified. */
interface Received {
  event: {
    id: string;
    type: string;
    conversation_id: string;
    livechat_conversation_id: string | null;
    transcript?: { content: string }[];
    message?: { content: string };
  };
  signed: boolean;
}

/** A receiver on 127.0.0.1 answering each delivery with the next of `statuses` (then 200). */
async function receiver(statuses: number[] = [], port = 0) {
  const received: Received[] = [];
  const answers = [...statuses];
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      // Verified by stripe-node, as a receiver would verify it, over the raw body.
      const header = String(request.headers["x-channelkit-signature"] ?? "");
      let signed = true;
      try {
        stripe.webhooks.constructEvent(body, header, SECRET);
      } catch {
        signed = false;
      }
      received.push({ event: JSON.parse(body), signed });
      const status = answers.shift() ?? 200;
      response.writeHead(status, status === 429 ? { "retry-after": "0" } : {}).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  open.push(server);
  return { received, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`, server };
}

/** The service behind a real node:http server on 127.0.0.1. */
async function served(options: Omit<LiveChatWebhookBridgeOptions, "secret">) {
  const warnings: string[] = [];
  const service = await createChannelService({
    storage: memoryStorage(),
    flows: demoFlows,
    logger: { warn: (message) => void warnings.push(message), error: () => undefined },
    livechat: liveChatWebhookBridge({ secret: SECRET, retry: { attempts: 4, initialDelayMs: 20, maxDelayMs: 100 }, ...options }),
  });
  services.push(service);
  const server = createServer((request, response) => void forward(service, request, response));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  open.push(server);
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { tenant } = await service.admin.createTenant({ name: "Desk" });
  const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "handover" });
  const execute = async (payload: string, conversationId?: string) => {
    const response = await fetch(`${base}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload, ...(conversationId ? { conversation_id: conversationId } : {}) }),
    });
    return (await response.json()) as { conversation_id: string; status: string; output: { messages: unknown[] } };
  };
  const history = async (id: string) =>
    (await (await fetch(`${base}/public/v1/api/conversations/${id}/messages`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
      mode: string;
      livechat_conversation_id: string | null;
      messages: { origin: string; role: string; sender: string | null; content: string; livechat_message_id: string | null }[];
    };
  /** Sends an event to the inbound route as the receiver would; `sign` false sends none, a string signs with it. */
  const inbound = async (event: unknown, sign: boolean | string = true, timestamp?: number) => {
    const body = typeof event === "string" ? event : JSON.stringify(event);
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (sign !== false) headers["x-channelkit-signature"] = await signRequestBody(sign === true ? SECRET : sign, body, timestamp);
    return fetch(`${base}/api/v1/livechat/bridge/events`, { method: "POST", headers, body });
  };
  const cancel = (id: string) =>
    fetch(`${base}/public/v1/api/conversations/${id}/livechat/cancel`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
  return { base, execute, history, inbound, cancel, warnings };
}

/** A minimal node:http adapter, so that the inbound route is called over real HTTP. */
async function forward(service: ChannelService, request: IncomingMessage, response: ServerResponse) {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
  const answer = await service.handler(
    new Request(`http://127.0.0.1${request.url}`, { method: request.method, headers: request.headers as Record<string, string>, ...(body ? { body } : {}) }),
  );
  response.writeHead(answer.status, Object.fromEntries(answer.headers));
  response.end(Buffer.from(await answer.arrayBuffer()));
}

async function until(probe: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const open: Server[] = [];
const services: ChannelService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((service) => service.close()));
  for (const server of open.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe("the live-chat webhook bridge: outbound", () => {
  it("posts the handover with its transcript, then the user's messages in order, then the cancel, each signed", async () => {
    const desk = await receiver();
    const { execute, inbound } = await served({ url: desk.url });
    const { conversation_id: id } = await execute("I want a human");
    await execute("hello?", id);
    await execute("anyone?", id);
    expect((await inbound({ type: "agent_joined", conversation_id: id, livechat_conversation_id: "zd-1" })).status).toBe(200);
    await until(() => desk.received.length === 3);
    expect(desk.received.map((r) => [r.event.type, r.signed])).toEqual([
      ["handover", true],
      ["user_message", true],
      ["user_message", true],
    ]);
    expect(desk.received[0]?.event.transcript?.map((m) => m.content)).toEqual(["I want a human", "Connecting you to an agent"]);
    expect(desk.received.slice(1).map((r) => r.event.message?.content)).toEqual(["hello?", "anyone?"]);
    expect(desk.received.every((r) => r.event.conversation_id === id)).toBe(true);
  });

  it("tells of the user's cancel, with the live chat's id", async () => {
    const desk = await receiver();
    const { execute, inbound, cancel } = await served({ url: desk.url });
    const { conversation_id: id } = await execute("help");
    await inbound({ type: "agent_joined", conversation_id: id, livechat_conversation_id: "zd-2" });
    expect((await cancel(id)).status).toBe(200);
    await until(() => desk.received.length === 2);
    expect(desk.received.map((r) => [r.event.type, r.event.livechat_conversation_id, r.signed])).toEqual([
      ["handover", null, true],
      ["cancelled", "zd-2", true],
    ]);
  });

  it("retries a receiver that answers 503 or 429, then delivers the same event; a 400 is not retried", async () => {
    const desk = await receiver([503, 429]);
    const { execute } = await served({ url: desk.url });
    await execute("help");
    await until(() => desk.received.length === 3);
    expect(desk.received.map((r) => r.event.type)).toEqual(["handover", "handover", "handover"]);
    expect(new Set(desk.received.map((r) => r.event.id)).size).toBe(1);

    const refusing = await receiver([400]);
    const second = await served({ url: refusing.url });
    await second.execute("help");
    await until(() => second.warnings.some((w) => w.includes("dropped the handover event")));
    expect(refusing.received).toHaveLength(1);
    expect(second.warnings.find((w) => w.includes("dropped"))).toContain("the receiver answered 400");
  });

  it("delivers to a receiver that was down when the handover happened and comes back", async () => {
    const placeholder = await receiver();
    const port = Number(new URL(placeholder.url).port);
    placeholder.server.closeAllConnections();
    await new Promise((resolve) => placeholder.server.close(resolve));
    const { execute } = await served({ url: placeholder.url, retry: { attempts: 10, initialDelayMs: 50, maxDelayMs: 100 } });
    await execute("help");
    await new Promise((resolve) => setTimeout(resolve, 150));
    const back = await receiver([], port);
    await until(() => back.received.length === 1, 5000);
    expect(back.received[0]).toMatchObject({ signed: true, event: { type: "handover" } });
  });
});

describe("the live-chat webhook bridge: inbound", () => {
  it("an agent joins, writes (a retried id stored once) and closes; then the bot has the conversation again", async () => {
    const desk = await receiver();
    const { execute, history, inbound } = await served({ url: desk.url });
    const { conversation_id: id } = await execute("help");
    const joined = await inbound({ type: "agent_joined", conversation_id: id, livechat_conversation_id: "zd-9" });
    expect(await joined.json()).toEqual({ conversation_id: id, mode: "livechat_active", livechat_status_message: null, livechat_conversation_id: "zd-9" });
    const message = { type: "agent_message", conversation_id: id, message: { content: "Hi, Ann from support", id: "zd-msg-1" } };
    const first = await inbound(message);
    expect((await first.json()).message).toMatchObject({ origin: "livechat", role: "assistant", sender: "agent", livechat_message_id: "zd-msg-1" });
    expect((await inbound(message)).status).toBe(200);
    const during = await history(id);
    expect(during).toMatchObject({ mode: "livechat_active", livechat_conversation_id: "zd-9" });
    expect(during.messages.filter((m) => m.livechat_message_id === "zd-msg-1")).toHaveLength(1);
    expect((await (await inbound({ type: "closed", conversation_id: id })).json()).mode).toBe("livechat_closed");
    const again = await execute("thanks", id);
    expect(again.output.messages).toEqual([{ role: "assistant", content: "Connecting you to an agent" }]);
    await until(() => desk.received.filter((r) => r.event.type === "handover").length === 2);
  });

  it("refuses what is not signed with the secret, what is malformed, and what does not apply", async () => {
    const desk = await receiver();
    const { base, execute, inbound } = await served({ url: desk.url });
    const { conversation_id: id } = await execute("help");
    const event = { type: "closed", conversation_id: id };
    const code = async (response: Response) => [response.status, ((await response.json()) as { error: { code: string } }).error.code];
    const unsigned = (await (await inbound(event, false)).json()) as { error: { code: string; message: string } };
    // The refusal names the header the bridge reads, not execute's.
    expect(unsigned.error).toEqual({ code: "signature_required", message: expect.stringContaining("X-Channelkit-Signature") });
    const wrong = (await (await inbound(event, "another-secret-0123456789")).json()) as { error: { code: string; message: string } };
    expect(wrong.error).toEqual({ code: "invalid_signature", message: expect.stringContaining("X-Channelkit-Signature") });
    expect(await code(await inbound(event, true, Math.floor(Date.now() / 1000) - 301))).toEqual([401, "signature_expired"]);
    // A receiver that signs with stripe-node is understood.
    const stripeSigned = await fetch(`${base}/api/v1/livechat/bridge/events`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-channelkit-signature": stripe.webhooks.generateTestHeaderString({
          payload: JSON.stringify({ type: "unavailable", conversation_id: id }),
          secret: SECRET,
        }),
      },
      body: JSON.stringify({ type: "unavailable", conversation_id: id }),
    });
    expect(await stripeSigned.json()).toMatchObject({ conversation_id: id, mode: "livechat_unavailable" });
    expect(await code(await inbound("{not json"))).toEqual([422, "validation_error"]);
    expect(await code(await inbound({ type: "agent_left", conversation_id: id }))).toEqual([422, "validation_error"]);
    expect(await code(await inbound({ type: "closed", conversation_id: id, extra: 1 }))).toEqual([422, "validation_error"]);
    expect(await code(await inbound({ type: "agent_message", conversation_id: id, message: { content: "" } }))).toEqual([422, "validation_error"]);
    expect(await code(await inbound({ type: "closed", conversation_id: crypto.randomUUID() }))).toEqual([404, "conversation_not_found"]);
    // Nobody will take it now: an agent can no longer join, nor close.
    expect(await code(await inbound({ type: "agent_joined", conversation_id: id }))).toEqual([409, "livechat_conflict"]);
    expect(await code(await inbound(event))).toEqual([409, "livechat_conflict"]);
  });

  it("refuses bad options at creation, naming them", () => {
    expect(() => liveChatWebhookBridge({ url: "ftp://desk", secret: SECRET })).toThrow(/url must be an http\(s\) URL/);
    expect(() => liveChatWebhookBridge({ url: "https://desk.example", secret: "short" })).toThrow(/secret must be at least 16 characters/);
  });
});
