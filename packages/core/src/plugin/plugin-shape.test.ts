import { z } from "zod";
import { describe, expect, it } from "vitest";
import {
  apiChannel,
  authenticateRequest,
  type ChannelPlugin,
  channelFlow,
  createChannelService,
  defineRoute,
  json,
  liveChatInbox,
  type RunEndedEvent,
  runToEnd,
  ServiceError,
} from "../index.js";
import { echoFlow, handoverFlow } from "../flows/demo.js";
import { memoryStorage } from "../storage/memory.js";

const SECRET = "ab".repeat(32);
const TAG = { name: "Test", description: "A test plugin." };

/** A plugin with one route of every kind the plugin API offers: a body and a query validated by its schemas, its own error code, a run on an external key. */
function threadChannel(events: { name: string; event: unknown }[] = []): ChannelPlugin {
  return {
    id: "thread",
    errorCodes: { thread_closed: { status: 409, message: "This thread is closed." } },
    hooks: {
      runStarted: (event) => void events.push({ name: "runStarted", event }),
      runEnded: (event, ctx) => void events.push({ name: "runEnded", event: { ...event, hasContext: typeof ctx.runs.start === "function" } }),
      handover: (event) => void events.push({ name: "handover", event }),
      modeChanged: (event) => void events.push({ name: "modeChanged", event }),
      agentMessage: (event) => void events.push({ name: "agentMessage", event }),
    },
    routes: [
      defineRoute({
        method: "POST",
        path: "/threads/:thread_id/messages",
        auth: "channelKey",
        cors: { headers: ["Authorization", "Content-Type"], optionalHeaders: ["X-Thread-Trace"] },
        query: z.strictObject({ shout: z.enum(["yes", "no"]).optional().meta({ description: "Upper-case the reply." }) }),
        body: z.strictObject({ text: z.string().min(1) }),
        doc: {
          operationId: "postThreadMessage",
          summary: "Post to a thread",
          tag: TAG,
          responses: { 200: { description: "The reply.", json: z.object({ reply: z.string(), conversation_id: z.string() }) } },
          errors: ["missing_api_key", "invalid_api_key", "validation_error", "thread_closed"],
        },
        // The call's readers destructured, as a handler may write them.
        async handle({ request, params, query, body }, ctx) {
          const { channel } = await authenticateRequest(request, ctx);
          if (params.thread_id === "closed") throw new ServiceError("thread_closed");
          const { shout } = query();
          const { text } = await body();
          const run = await ctx.runs.start({
            channel,
            flow: channelFlow(ctx, channel),
            conversation: { externalKey: params.thread_id },
            payload: text,
            metadata: { thread: params.thread_id },
            request,
            live: false,
          });
          const outcome = await runToEnd(run);
          const reply = outcome.produced.map((message) => message.content).join("");
          return json({ reply: shout === "yes" ? reply.toUpperCase() : reply, conversation_id: run.conversationId });
        },
      }),
    ],
  };
}

async function serviceWith(plugins: ChannelPlugin[], options: { channels?: ChannelPlugin[]; flow?: string } = {}) {
  const storage = memoryStorage();
  const service = await createChannelService({
    storage,
    flows: [echoFlow, handoverFlow],
    plugins,
    secretKey: SECRET,
    livechat: liveChatInbox({ development: true }),
    ...(options.channels ? { channels: options.channels } : {}),
  });
  const { tenant } = await service.admin.createTenant({ name: "Plugins" });
  const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: options.flow ?? "echo" });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    service.handler(
      new Request(`http://host.test${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      }),
    );
  return { service, storage, tenant, key, post };
}

describe("a plugin's route", () => {
  it("runs the flow in the conversation of an external key: the same key continues it, another starts its own", async () => {
    const { service, storage, post } = await serviceWith([threadChannel()]);
    try {
      const first = await post("/threads/t-1/messages", { text: "hello" });
      expect(first.status).toBe(200);
      const one = (await first.json()) as { reply: string; conversation_id: string };
      expect(one.reply).toBe("Echo: hello");
      const second = (await (await post("/threads/t-1/messages?shout=yes", { text: "again" })).json()) as { reply: string; conversation_id: string };
      expect(second).toEqual({ reply: "ECHO: AGAIN", conversation_id: one.conversation_id });
      const other = (await (await post("/threads/t-2/messages", { text: "hi" })).json()) as { conversation_id: string };
      expect(other.conversation_id).not.toBe(one.conversation_id);
      const history = await storage.listRecentMessages(one.conversation_id, 10);
      expect(history.map((message) => message.content)).toEqual(["hello", "Echo: hello", "again", "Echo: again"]);
    } finally {
      await service.close();
    }
  });

  it("validates its body and query by its schemas (422 naming the field), after its own checks", async () => {
    const { service, post } = await serviceWith([threadChannel()]);
    try {
      const badBody = await post("/threads/t-1/messages", { text: "" });
      expect(badBody.status).toBe(422);
      expect(await badBody.json()).toMatchObject({ error: { code: "validation_error", details: [{ path: "text" }] } });
      const badQuery = await post("/threads/t-1/messages?shout=loud", { text: "x" });
      expect(badQuery.status).toBe(422);
      expect(await badQuery.json()).toMatchObject({ error: { code: "validation_error", details: [{ path: "shout" }] } });
      // The key is checked first: a bad body from nobody is a 401.
      const anonymous = await service.handler(new Request("http://host.test/threads/t-1/messages", { method: "POST", body: "{" }));
      expect(anonymous.status).toBe(401);
      const notJson = await post("/threads/t-1/messages", "text", { "content-type": "text/plain" });
      expect(notJson.status).toBe(415);
    } finally {
      await service.close();
    }
  });

  it("answers its plugin's own error code in the envelope with the code's status", async () => {
    const { service, post } = await serviceWith([threadChannel()]);
    try {
      const closed = await post("/threads/closed/messages", { text: "x" });
      expect(closed.status).toBe(409);
      expect(await closed.json()).toEqual({ error: { code: "thread_closed", message: "This thread is closed." } });
    } finally {
      await service.close();
    }
  });

  it("gets a derived preflight naming its methods, with its optional header only when asked", async () => {
    const { service } = await serviceWith([threadChannel()]);
    try {
      const preflight = (asked?: string) =>
        service.handler(
          new Request("http://host.test/threads/t-1/messages", {
            method: "OPTIONS",
            headers: { origin: "https://app.test", ...(asked ? { "access-control-request-headers": asked } : {}) },
          }),
        );
      const plain = await preflight();
      expect(plain.status).toBe(204);
      expect(plain.headers.get("access-control-allow-methods")).toBe("POST, OPTIONS");
      expect(plain.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type");
      const asked = await preflight("content-type, x-thread-trace");
      expect(asked.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, X-Thread-Trace");
    } finally {
      await service.close();
    }
  });

  it("is in the OpenAPI document the service serves, with its tag, query, body, answer and error code", async () => {
    const { service } = await serviceWith([threadChannel()]);
    try {
      const document = (await (await service.handler(new Request("http://host.test/public/v1/openapi.json"))).json()) as {
        paths: Record<
          string,
          Record<
            string,
            {
              operationId: string;
              tags: string[];
              parameters?: { name: string; in: string }[];
              "x-channelkit-plugin"?: string;
              responses: Record<string, unknown>;
            }
          >
        >;
        tags: { name: string }[];
      };
      const operation = document.paths["/threads/{thread_id}/messages"]?.post;
      expect(operation).toMatchObject({ operationId: "postThreadMessage", tags: ["Test"], "x-channelkit-plugin": "thread" });
      expect(operation?.parameters?.map((parameter) => `${parameter.in} ${parameter.name}`)).toContain("query shout");
      expect(Object.keys(operation?.responses ?? {})).toEqual(expect.arrayContaining(["200", "401", "409", "422"]));
      expect(JSON.stringify(operation?.responses["409"])).toContain("thread_closed");
      expect(document.paths["/threads/{thread_id}/messages"]?.options?.operationId).toBe("preflightPostThreadMessage");
      expect(document.tags.map((tag) => tag.name)).toContain("Test");
    } finally {
      await service.close();
    }
  });
});

describe("a plugin's hooks", () => {
  it("hear a run start and end, a handover, the mode changes and an agent's message", async () => {
    const events: { name: string; event: unknown }[] = [];
    const { service, post } = await serviceWith([threadChannel(events)], { flow: "handover" });
    try {
      const answered = (await (await post("/threads/h-1/messages", { text: "help" })).json()) as { conversation_id: string };
      const conversationId = answered.conversation_id;
      const names = () => events.map((entry) => entry.name);
      expect(names()).toEqual(["runStarted", "modeChanged", "handover", "runEnded"]);
      const ended = events[3]?.event as RunEndedEvent;
      expect(ended).toMatchObject({ conversationId, flowName: "handover", metadata: { thread: "h-1" }, outcome: { status: "pending" }, hasContext: true });
      expect(events[1]?.event).toMatchObject({ conversationId, from: "bot", to: "livechat_waiting" });
      const inbox = (path: string, body?: unknown) =>
        service.handler(
          new Request(`http://host.test/api/v1/livechat/conversations/${conversationId}${path}`, {
            method: "POST",
            headers: { "x-tenant-id": (ended.channel as { tenantId: string }).tenantId, "content-type": "application/json" },
            body: JSON.stringify(body ?? {}),
          }),
        );
      expect((await inbox("/accept")).status).toBe(200);
      expect((await inbox("/messages", { content: "Hi, I am Ana" })).status).toBe(200);
      expect(names().slice(4)).toEqual(["modeChanged", "agentMessage"]);
      expect(events[5]?.event).toMatchObject({ conversationId, message: { content: "Hi, I am Ana" } });
    } finally {
      await service.close();
    }
  });

  it("a hook that throws is logged and changes nothing", async () => {
    const failures: unknown[] = [];
    const storage = memoryStorage();
    const service = await createChannelService({
      storage,
      flows: [echoFlow],
      secretKey: SECRET,
      logger: { warn: () => undefined, error: (...details) => void failures.push(details) },
      plugins: [
        {
          id: "broken",
          hooks: {
            runEnded() {
              throw new Error("hook down");
            },
          },
        },
      ],
    });
    try {
      const { tenant } = await service.admin.createTenant({ name: "T" });
      const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
      const response = await service.handler(
        new Request("http://host.test/public/v1/api/execute", {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ payload: "hi", stream: false }),
        }),
      );
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ status: "success" });
      expect(JSON.stringify(failures)).toContain("runEnded");
    } finally {
      await service.close();
    }
  });
});

describe("the service's plugins", () => {
  it("mount the channels a host chooses: left out, a channel's routes are 404", async () => {
    const { service, post } = await serviceWith([], { channels: [apiChannel()] });
    try {
      const webhook = await service.handler(new Request("http://host.test/channels/webhook/x/startConversation", { method: "POST" }));
      expect(webhook.status).toBe(404);
      const widget = await service.handler(new Request("http://host.test/public/widget/config"));
      expect(widget.status).toBe(404);
      expect((await post("/public/v1/api/execute", { payload: "hi", stream: false })).status).toBe(200);
      expect(service.routes.some((route) => route.path.startsWith("/public/widget"))).toBe(false);
    } finally {
      await service.close();
    }
  });

  it("are refused at start-up with two of one id, a bad id, a code of the contract's, or a code declared twice differently", async () => {
    const start = (plugins: ChannelPlugin[]) => createChannelService({ storage: memoryStorage(), flows: [echoFlow], secretKey: SECRET, plugins });
    await expect(start([{ id: "twin" }, { id: "twin" }])).rejects.toThrow(/two plugins have the id "twin"/);
    await expect(start([{ id: "Not An Id" }])).rejects.toThrow(/a plugin's id/);
    await expect(start([{ id: "a", errorCodes: { not_found: { status: 404, message: "x" } } }])).rejects.toThrow(/channelkit's own/);
    await expect(start([{ id: "b", errorCodes: { odd_code: { status: 200, message: "x" } } }])).rejects.toThrow(/400 to 599/);
    await expect(
      start([
        { id: "c", errorCodes: { clash_code: { status: 409, message: "one" } } },
        { id: "d", errorCodes: { clash_code: { status: 410, message: "two" } } },
      ]),
    ).rejects.toThrow(/both declare the error code "clash_code"/);
  });

  it("are closed by service.close(), after the runs", async () => {
    const closed: string[] = [];
    const service = await createChannelService({
      storage: memoryStorage(),
      flows: [echoFlow],
      secretKey: SECRET,
      plugins: [
        { id: "first", close: () => void closed.push("first") },
        { id: "second", close: async () => void closed.push("second") },
      ],
    });
    await service.close();
    expect(closed).toEqual(["first", "second"]);
  });
});
