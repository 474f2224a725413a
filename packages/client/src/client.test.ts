/**
 * The client against a real service on 127.0.0.1 (node:http, SQLite, the demo flows): execute,
 * stream, history, signatures, the webhook channel, the admin routes and the widget routes.
 */
import { readFile, readdir } from "node:fs/promises";
import { signRequestBody } from "@channelkit/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChannelkitClient, ChannelkitError, createClient, isChannelkitError, signatureHeader, type UIMessageChunk } from "./index.js";
import { eventually, startServer, type TestServer } from "./test-server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.close();
});

/** A client of the test server. */
function clientOf(options: Omit<Parameters<typeof createClient>[0], "baseUrl"> = {}): ChannelkitClient {
  return createClient({ baseUrl: server.url, ...options });
}

/** The rejection of `promise`, which must be a ChannelkitError. */
async function failure(promise: Promise<unknown>): Promise<ChannelkitError> {
  const error = await promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(ChannelkitError);
  return error as ChannelkitError;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const APP = "https://app.example";

describe("execute", () => {
  it("runs the flow and answers the run as JSON; conversation_id goes on with the conversation", async () => {
    const channel = await server.channel({ flow: "echo", defaultStream: true });
    const client = clientOf({ apiKey: channel.key });
    // The channel streams by default: execute asks for JSON itself.
    const first = await client.execute({ payload: "Hello, channelkit!", metadata: { source: "client-test" } });
    expect(first.run_id).toMatch(UUID);
    expect(first.conversation_id).toMatch(UUID);
    expect(first.status).toBe("success");
    expect(first.output?.messages).toEqual([{ role: "assistant", content: "Echo: Hello, channelkit!" }]);
    expect(first.output?.result).toEqual({ echo: "Hello, channelkit!", turn: 1 });
    expect(first.output?.metadata).toMatchObject({ channel_id: channel.id, flow_name: "echo", environment: "prod", livechat_mode: null });
    expect(first.error).toBeNull();

    const second = await client.execute({ payload: "again", conversation_id: first.conversation_id });
    expect(second.conversation_id).toBe(first.conversation_id);
    expect(second.output?.result).toEqual({ echo: "again", turn: 2 });
  });

  it("a flow that fails is a run with status error, not a rejection", async () => {
    const channel = await server.channel({ flow: "fail" });
    const run = await clientOf({ apiKey: channel.key }).execute({ payload: "go" });
    expect(run.status).toBe("error");
    expect(run.error).toEqual({ code: "flow_error", message: "flow failed on purpose" });
  });

  it("refusals are typed: missing_api_key, invalid_api_key, validation_error with its details, conversation_not_found", async () => {
    const channel = await server.channel({ flow: "echo" });
    const missing = await failure(clientOf().execute({ payload: "hi" }));
    expect([missing.status, missing.code]).toEqual([401, "missing_api_key"]);
    expect(missing.message).toMatch(/Authorization: Bearer/);

    const invalid = await failure(clientOf({ apiKey: "svc_live_notakey" }).execute({ payload: "hi" }));
    expect([invalid.status, invalid.code]).toEqual([401, "invalid_api_key"]);
    expect(isChannelkitError(invalid, "invalid_api_key")).toBe(true);
    expect(isChannelkitError(invalid, "missing_api_key")).toBe(false);

    const client = clientOf({ apiKey: channel.key });
    const empty = await failure(client.execute({ payload: "" }));
    expect([empty.status, empty.code]).toEqual([422, "validation_error"]);
    expect(JSON.stringify(empty.details)).toContain("payload");

    const unknown = await failure(client.execute({ payload: "hi", conversation_id: crypto.randomUUID() }));
    expect([unknown.status, unknown.code]).toEqual([404, "conversation_not_found"]);
    expect(unknown.detail).toBeUndefined();
  });
});

describe("stream", () => {
  it("is an async iterable of typed UI message chunks, in the protocol's order; run ids from data-run", async () => {
    const channel = await server.channel({ flow: "echo" });
    const client = clientOf({ apiKey: channel.key });
    const reply = await client.stream({ payload: "Stream me" });
    expect(reply.response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(reply.response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
    expect(reply.run?.run_id).toMatch(UUID);
    expect(reply.runId).toBe(reply.run?.run_id);
    expect(reply.conversationId).toBe(reply.run?.conversation_id);
    const chunks: UIMessageChunk[] = [];
    for await (const chunk of reply) chunks.push(chunk);
    expect(chunks[0]).toEqual({ type: "data-run", data: reply.run });
    const types = chunks.map((chunk) => chunk.type);
    expect(types.slice(0, 2)).toEqual(["data-run", "text-start"]);
    expect(types.slice(-2)).toEqual(["text-end", "finish"]);
    expect(new Set(types.slice(2, -2))).toEqual(new Set(["text-delta"]));
    const text = chunks.map((chunk) => (chunk.type === "text-delta" ? chunk.delta : "")).join("");
    expect(text).toBe("Echo: Stream me");
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "stop", messageMetadata: { status: "success", livechat_mode: null } });
    // A stream is read once.
    await expect(async () => {
      for await (const _ of reply) break;
    }).rejects.toThrow(/read once/);

    // text() reads the whole reply; conversation_id goes on with the conversation.
    const next = await client.stream({ payload: "more", conversation_id: reply.conversationId as string });
    expect(next.conversationId).toBe(reply.conversationId);
    expect(await next.text()).toBe("Echo: more");
    const history = await client.history(reply.conversationId as string);
    expect(history.messages.map((message) => message.content)).toEqual(["Stream me", "Echo: Stream me", "more", "Echo: more"]);
  });

  it("a run that fails after the stream began ends with an error chunk; text() rejects with stream_error", async () => {
    const channel = await server.channel({ flow: "fail" });
    const client = clientOf({ apiKey: channel.key });
    const chunks: UIMessageChunk[] = [];
    for await (const chunk of await client.stream({ payload: "go" })) chunks.push(chunk);
    expect(chunks.at(-1)).toEqual({ type: "error", errorText: "flow failed on purpose" });
    expect(chunks.some((chunk) => chunk.type === "finish")).toBe(false);

    const error = await failure((await client.stream({ payload: "go" })).text());
    expect([error.status, error.code, error.message]).toEqual([200, "stream_error", "flow failed on purpose"]);
  });

  it("an error before the stream began is a rejection of stream() itself", async () => {
    const error = await failure(clientOf({ apiKey: "svc_live_nope" }).stream({ payload: "hi" }));
    expect([error.status, error.code]).toEqual([401, "invalid_api_key"]);
  });

  it("an AbortSignal stops a stream mid-way: the loop throws the abort, the connection closes and the run is stored cancelled", async () => {
    const channel = await server.channel({ flow: "slow" });
    const client = clientOf({ apiKey: channel.key });
    const controller = new AbortController();
    const reply = await client.stream({ payload: "a long one" }, { signal: controller.signal });
    const deltas: string[] = [];
    const reading = (async () => {
      for await (const chunk of reply) {
        if (chunk.type !== "text-delta") continue;
        deltas.push(chunk.delta);
        if (deltas.length === 3) controller.abort();
      }
    })();
    const error = await reading.then(
      () => null,
      (reason: unknown) => reason as Error,
    );
    expect(error?.name).toBe("AbortError");
    expect(deltas).toEqual(["word1 ", "word2 ", "word3 "]);
    const run = await eventually(async () => {
      const stored = await server.target.storage.findRun(reply.runId as string);
      return !stored || stored.status === "running" ? undefined : stored;
    });
    expect(run?.status).toBe("cancelled");
    // An aborted signal refuses the next call at once.
    await expect(client.execute({ payload: "hi" }, { signal: controller.signal })).rejects.toMatchObject({ name: "AbortError" });
  });

  it("cancel() and leaving the loop early close the connection: the run is stored cancelled", async () => {
    const channel = await server.channel({ flow: "slow" });
    const client = clientOf({ apiKey: channel.key });
    const left = await client.stream({ payload: "one" });
    for await (const chunk of left) if (chunk.type === "text-delta") break;
    const cancelled = await client.stream({ payload: "two" });
    await cancelled.cancel();
    for (const reply of [left, cancelled]) {
      const run = await eventually(async () => {
        const stored = await server.target.storage.findRun(reply.runId as string);
        return !stored || stored.status === "running" ? undefined : stored;
      });
      expect(run?.status).toBe("cancelled");
    }
  });
});

describe("history", () => {
  it("answers the conversation oldest first, with limit and token_budget; an unknown conversation is conversation_not_found with the service's detail", async () => {
    const channel = await server.channel({ flow: "echo" });
    const client = clientOf({ apiKey: channel.key });
    const run = await client.execute({ payload: "one" });
    await client.execute({ payload: "two", conversation_id: run.conversation_id });
    const history = await client.history(run.conversation_id);
    expect(history).toMatchObject({ session_id: run.conversation_id, total_messages: 4, mode: "bot", livechat_status_message: null });
    expect(history.messages.map((message) => [message.role, message.content, message.turn_index])).toEqual([
      ["user", "one", 0],
      ["assistant", "Echo: one", 1],
      ["user", "two", 2],
      ["assistant", "Echo: two", 3],
    ]);
    expect(history.messages[1]).toMatchObject({ origin: "agent", run_id: run.run_id, node_type: "echo", sender: null });
    const last = await client.history(run.conversation_id, { limit: 2 });
    expect(last.messages.map((message) => message.content)).toEqual(["two", "Echo: two"]);
    const budget = await client.history(run.conversation_id, { token_budget: 3 });
    expect(budget.messages.map((message) => message.content)).toEqual(["Echo: two"]);

    const unknown = crypto.randomUUID();
    const error = await failure(client.history(unknown));
    expect(error.status).toBe(404);
    expect(error.code).toBe("conversation_not_found");
    expect(error.detail).toBe(`No conversation found for session id ${unknown}`);
    expect(error.message).toBe(error.detail);

    const bad = await failure(client.history(run.conversation_id, { limit: 500 }));
    expect([bad.status, bad.code]).toEqual([422, "validation_error"]);
  });
});

describe("signatures", () => {
  it("signs execute, stream and the widget's chat over the exact bytes it sends; a wrong secret is invalid_signature, none is signature_required", async () => {
    const channel = await server.channel({ flow: "echo", requireSignature: true });
    expect(channel.signingSecret).toMatch(/^svc_sig_/);
    const client = clientOf({ apiKey: channel.key, signingSecret: channel.signingSecret as string });
    // Bytes that any re-encoding would change: non-ASCII, an astral character, escapes.
    const payload = 'Grüße 😀 "quoted" </script> \\ tab\t';
    const run = await client.execute({ payload, metadata: { nested: { é: [1, 2.5, null] } } });
    expect(run.output?.messages[0]?.content).toBe(`Echo: ${payload}`);
    expect(await (await client.stream({ payload, conversation_id: run.conversation_id })).text()).toBe(`Echo: ${payload}`);

    const wrong = await failure(clientOf({ apiKey: channel.key, signingSecret: "svc_sig_wrong" }).execute({ payload: "hi" }));
    expect([wrong.status, wrong.code]).toEqual([401, "invalid_signature"]);
    const none = await failure(clientOf({ apiKey: channel.key }).execute({ payload: "hi" }));
    expect([none.status, none.code]).toEqual([401, "signature_required"]);
    const streamed = await failure(clientOf({ apiKey: channel.key, signingSecret: "svc_sig_wrong" }).stream({ payload: "hi" }));
    expect(streamed.code).toBe("invalid_signature");
    // History takes no signature: the client's is ignored there.
    expect((await client.history(run.conversation_id)).total_messages).toBe(4);
  });

  it("signatureHeader computes the service's own header (core's signRequestBody) with Web Crypto", async () => {
    const body = JSON.stringify({ payload: "Grüße 😀" });
    const timestamp = 1_700_000_000;
    expect(await signatureHeader("svc_sig_secret", body, timestamp)).toBe(await signRequestBody("svc_sig_secret", body, timestamp));
    expect(await signatureHeader("svc_sig_secret", new TextEncoder().encode(body), timestamp)).toBe(await signRequestBody("svc_sig_secret", body, timestamp));
    expect(await signatureHeader("other", body, timestamp)).not.toBe(await signRequestBody("svc_sig_secret", body, timestamp));
    expect(await signatureHeader("svc_sig_secret", body)).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
  });
});

describe("webhook", () => {
  it("startConversation then newMessage, in the webhook's names; an unknown client_id is channel_not_found, an empty userInput validation_error", async () => {
    const channel = await server.channel({ flow: "echo", type: "webhook", languages: ["en_US", "fr_FR"] });
    expect(channel.clientId).toBeTruthy();
    const webhook = clientOf().webhook(channel.clientId as string);
    const started = await webhook.startConversation({ language: "fr_FR", integrationContext: { crm: "42" } });
    const record = started.conversation.conversation;
    expect(record.id).toMatch(UUID);
    expect(record.eventStack.map((event) => event.type)).toEqual(["START", "BOT_MESSAGE"]);
    expect(record.context).toMatchObject({ language: "fr_FR", channel: { id: channel.id, channelType: "webhook", languages: ["en_US", "fr_FR"] } });
    expect(started.conversation.newMessages.newEvents).toHaveLength(1);
    const greeting = started.conversation.newMessages.newEvents[0];
    expect(greeting?.type === "BOT_MESSAGE" && greeting.data).toMatchObject({ rawContent: "Hello! How can I help you?", suggestions: ["Echo test"] });

    const answered = await webhook.newMessage({ conversationId: record.id, userInput: "<b>Echo</b> test" });
    const reply = answered.conversation.newEvents[0];
    expect(reply?.type).toBe("BOT_MESSAGE");
    if (reply?.type !== "BOT_MESSAGE") throw new Error("no reply");
    expect(reply.data.rawContent).toBe("Echo: <b>Echo</b> test");
    expect(reply.data.content).toBe("Echo: &lt;b&gt;Echo&lt;/b&gt; test");

    const unknown = await failure(clientOf().webhook("no-such-client").startConversation({ language: "en_US" }));
    expect([unknown.status, unknown.code]).toEqual([404, "channel_not_found"]);
    const empty = await failure(webhook.newMessage({ conversationId: record.id, userInput: "" }));
    expect([empty.status, empty.code]).toEqual([422, "validation_error"]);
    const foreign = await failure(webhook.newMessage({ conversationId: crypto.randomUUID(), userInput: "hi" }));
    expect([foreign.status, foreign.code]).toEqual([404, "conversation_not_found"]);
  });

  it("a webhook channel that requires signatures takes the client's signed calls, and refuses unsigned ones", async () => {
    const channel = await server.channel({ flow: "echo", type: "webhook", requireSignature: true });
    const signed = clientOf().webhook(channel.clientId as string, { signingSecret: channel.signingSecret as string });
    const started = await signed.startConversation({ language: "en_US" });
    const answered = await signed.newMessage({ conversationId: started.conversation.conversation.id, userInput: "signed" });
    expect(answered.conversation.newEvents[0]).toMatchObject({ type: "BOT_MESSAGE", data: { rawContent: "Echo: signed" } });
    const unsigned = await failure(
      clientOf()
        .webhook(channel.clientId as string)
        .startConversation({ language: "en_US" }),
    );
    expect([unsigned.status, unsigned.code]).toEqual([401, "signature_required"]);
    // The client's own signing secret is the default.
    const byDefault = createClient({ baseUrl: server.url, signingSecret: channel.signingSecret as string }).webhook(channel.clientId as string);
    expect((await byDefault.startConversation({ language: "en_US" })).conversation.conversation.status).toBe("ACTIVE");
  });
});

describe("admin", () => {
  it("rotateKey: the new key works at once and the old one is invalid_api_key", async () => {
    const channel = await server.channel({ flow: "echo" });
    const admin = clientOf({ adminToken: await server.adminToken(channel.tenantId) }).admin(channel.tenantId);
    const rotated = await admin.rotateKey(channel.id);
    expect(rotated.api_key).toMatch(/^svc_live_/);
    expect(rotated.channel).toEqual({ id: channel.id, api_key_hint: `svc_live_****${rotated.api_key.slice(-4)}` });
    expect((await clientOf({ apiKey: rotated.api_key }).execute({ payload: "new key" })).status).toBe("success");
    const old = await failure(clientOf({ apiKey: channel.key }).execute({ payload: "old key" }));
    expect(old.code).toBe("invalid_api_key");
  });

  it("updateChannel turns require_signature on (answering the secret once), rotateSigningSecret replaces it; getChannel and audit read them back", async () => {
    const channel = await server.channel({ flow: "echo" });
    const admin = clientOf({ adminToken: await server.adminToken(channel.tenantId, "ann") }).admin(channel.tenantId);
    const updated = await admin.updateChannel(channel.id, { config: { require_signature: true }, name: "Signed", default_stream: true });
    expect(updated.channel).toMatchObject({
      id: channel.id,
      name: "Signed",
      default_stream: true,
      config: { require_signature: true },
      has_signing_secret: true,
    });
    const first = updated.signing_secret as string;
    expect(first).toMatch(/^svc_sig_/);
    expect((await clientOf({ apiKey: channel.key, signingSecret: first }).execute({ payload: "signed" })).status).toBe("success");

    const rotated = await admin.rotateSigningSecret(channel.id);
    expect(rotated.channel).toEqual({ id: channel.id, has_signing_secret: true });
    expect(rotated.signing_secret).not.toBe(first);
    expect((await clientOf({ apiKey: channel.key, signingSecret: rotated.signing_secret }).execute({ payload: "rotated" })).status).toBe("success");
    const stale = await failure(clientOf({ apiKey: channel.key, signingSecret: first }).execute({ payload: "stale" }));
    expect(stale.code).toBe("invalid_signature");

    // Unchanged require_signature: no secret in the answer.
    expect((await admin.updateChannel(channel.id, { config: { require_signature: true } })).signing_secret).toBeUndefined();
    expect((await admin.getChannel(channel.id)).channel).toMatchObject({ name: "Signed", config: { require_signature: true } });
    const audit = await admin.audit({ channel_id: channel.id, limit: 10 });
    expect(audit.events.map((event) => event.operation)).toEqual(["update_channel", "rotate_signing_secret", "update_channel", "create_channel"]);
    expect(audit.events[0]).toMatchObject({ actor: "ann", via: "http", outcome: "success", tenant_id: channel.tenantId });
    const page = await admin.audit({ channel_id: channel.id, limit: 3 });
    expect(page.next_cursor).toBeTruthy();
    const rest = await admin.audit({ channel_id: channel.id, limit: 3, cursor: page.next_cursor as string });
    expect(rest.events.map((event) => event.operation)).toEqual(["create_channel"]);
  });

  it("refusals are typed: an unknown field is validation_error, another tenant's token forbidden, no token unauthorized, an unknown channel channel_not_found", async () => {
    const channel = await server.channel({ flow: "echo" });
    const admin = clientOf({ adminToken: await server.adminToken(channel.tenantId) }).admin(channel.tenantId);
    const unknownField = await failure(admin.updateChannel(channel.id, { colour: "red" } as never));
    expect([unknownField.status, unknownField.code]).toEqual([422, "validation_error"]);
    const other = await server.channel({ flow: "echo" });
    const forbidden = await failure(
      clientOf({ adminToken: await server.adminToken(other.tenantId) })
        .admin(channel.tenantId)
        .rotateKey(channel.id),
    );
    expect([forbidden.status, forbidden.code]).toEqual([403, "forbidden"]);
    const anonymous = await failure(clientOf().admin(channel.tenantId).getChannel(channel.id));
    expect([anonymous.status, anonymous.code]).toEqual([401, "unauthorized"]);
    // The token may also be given per tenant.
    const explicit = clientOf().admin(channel.tenantId, { token: await server.adminToken(channel.tenantId) });
    expect((await explicit.getChannel(channel.id)).channel.id).toBe(channel.id);
    const missing = await failure(explicit.rotateSigningSecret(crypto.randomUUID()));
    expect([missing.status, missing.code]).toEqual([404, "channel_not_found"]);
  });
});

describe("widget", () => {
  it("config, and chat streamed from execute's body or the AI SDK's chat request, with a publishable key", async () => {
    const channel = await server.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], languages: ["en_US", "fr_FR"] });
    expect(channel.key).toMatch(/^svc_pub_/);
    const client = clientOf({ apiKey: channel.key, headers: { origin: APP } });
    const config = await client.widget.config();
    expect(config).toMatchObject({ channel_id: channel.id, locale: "en_US", languages: ["en_US", "fr_FR"], default_stream: false });
    expect(config.theme).toEqual({ primary_color: "#4338ca", position: "bottom-right", color_scheme: "auto" });
    expect(config.strings.title).toBeTruthy();
    const french = await client.widget.config({ locale: "fr_FR" });
    expect(french.locale).toBe("fr_FR");
    expect(french.strings.send).not.toBe(config.strings.send);

    const reply = await client.widget.chat({ payload: "from the widget" });
    expect(reply.conversationId).toMatch(UUID);
    expect(await reply.text()).toBe("Echo: from the widget");
    const chatId = `chat-${crypto.randomUUID()}`;
    const message = (text: string) => ({
      id: chatId,
      messages: [{ id: crypto.randomUUID(), role: "user" as const, parts: [{ type: "text", text }] }],
      trigger: "submit-message" as const,
    });
    const first = await client.widget.chat(message("first"));
    expect(await first.text()).toBe("Echo: first");
    const second = await client.widget.chat(message("second"));
    // The chat id is bound to one conversation.
    expect(second.conversationId).toBe(first.conversationId);
    expect(await second.text()).toBe("Echo: second");
    expect((await client.history(first.conversationId as string)).total_messages).toBe(4);
  });

  it("refusals are typed: a server key is public_key_required, an Origin not allowed origin_not_allowed", async () => {
    const serverChannel = await server.channel({ flow: "echo" });
    const serverKey = await failure(clientOf({ apiKey: serverChannel.key }).widget.config());
    expect([serverKey.status, serverKey.code]).toEqual([403, "public_key_required"]);
    const channel = await server.channel({ flow: "echo", mode: "public", allowedOrigins: [APP] });
    const elsewhere = clientOf({ apiKey: channel.key, headers: { origin: "https://elsewhere.example" } });
    const config = await failure(elsewhere.widget.config());
    expect([config.status, config.code]).toEqual([403, "origin_not_allowed"]);
    const chat = await failure(elsewhere.widget.chat({ payload: "hi" }));
    expect(chat.code).toBe("origin_not_allowed");
  });
});

describe("the package", () => {
  /** Runs a README's `ts` block against the test server: its key and URL the test's, its `process.stdout` captured. */
  async function runSnippet(code: string, key: string): Promise<string> {
    let printed = "";
    const body = code
      .replace(/^import .*$/gm, "")
      .replaceAll('"http://127.0.0.1:3000"', JSON.stringify(server.url))
      .replaceAll('"svc_live_…"', JSON.stringify(key))
      .replaceAll("process.env.CHANNELKIT_KEY", JSON.stringify(key));
    const run = new Function("createClient", "ChannelkitError", "process", "console", `return (async () => {\n${body}\n})();`);
    const fake = {
      stdout: {
        write(text: string) {
          printed += text;
        },
      },
    };
    const quiet = {
      log(...values: unknown[]) {
        printed += `${values.map((value) => (typeof value === "string" ? value : JSON.stringify(value))).join(" ")}\n`;
      },
    };
    await run(createClient, ChannelkitError, fake, quiet);
    return printed;
  }

  it("the root README's client snippet runs as written", async () => {
    const readme = await readFile(new URL("../../../README.md", import.meta.url), "utf8");
    const code = readme.split("The same requests with the client")[1]?.match(/```ts\n([\s\S]*?)```/)?.[1];
    expect(code).toContain("createClient");
    const channel = await server.channel({ flow: "echo" });
    expect(await runSnippet(code as string, channel.key)).toBe("Echo: And now?");
  });

  it("the package README's example runs as written", async () => {
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const code = readme.match(/```ts\n([\s\S]*?)```/)?.[1];
    expect(code).toContain("createClient");
    const channel = await server.channel({ flow: "echo" });
    expect(await runSnippet(code as string, channel.key)).toBe(
      'success [{"role":"assistant","content":"Echo: Hello, channelkit!"}]\nEcho: And now?No conversation found for session id 9ac9ec54-0000-4000-8000-000000000000\n',
    );
  });

  it("uses Web standards only: no node: import, no Buffer, no process in its sources", async () => {
    const dir = new URL(".", import.meta.url);
    const sources = (await readdir(dir)).filter((name) => name.endsWith(".ts") && !name.endsWith(".test.ts") && !name.startsWith("test-"));
    expect(sources).toContain("client.ts");
    for (const name of sources) {
      const code = (await readFile(new URL(name, dir), "utf8")).replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
      expect(code, name).not.toMatch(/from "node:|\bBuffer\b|\bprocess\./);
      for (const [, specifier] of code.matchAll(/from "([^"]+)"/g)) expect(specifier, name).toMatch(/^(\.\/|eventsource-parser$)/);
    }
  });
});
