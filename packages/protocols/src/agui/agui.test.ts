import { randomUUID } from "node:crypto";
import { type BaseEvent, EventType, HttpAgent } from "@ag-ui/client";
import { externalConversationId } from "@channelkit/core";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "a9".repeat(32);

/** An AG-UI client of a channel on instance `to`, in a thread of its own unless `threadId` names one. */
function agent(instances: TwoInstances, channel: { id: string; key: string }, options: { to?: number; threadId?: string; key?: string } = {}) {
  return new HttpAgent({
    url: instances.url(channel.id, options.to),
    headers: { Authorization: `Bearer ${options.key ?? channel.key}` },
    threadId: options.threadId ?? randomUUID(),
  });
}

/** Runs the agent on one user message; answers the events it received and the messages it holds after. */
async function say(client: HttpAgent, text: string) {
  client.addMessage({ id: randomUUID(), role: "user", content: text });
  const events: BaseEvent[] = [];
  const result = await client.runAgent({}, { onEvent: ({ event }) => void events.push(event) });
  return { events, result, types: events.map((event) => event.type) };
}

function aguiTests(name: string, database: () => Promise<TestDatabase>) {
  describe(`AG-UI channels on ${name}`, () => {
    const instances = new TwoInstances();
    let echo: { id: string; key: string };
    let fail: { id: string; key: string };
    let weather: { id: string; key: string };

    beforeAll(async () => {
      await instances.start(await database(), SECRET_KEY);
      echo = await instances.channel("echo");
      fail = await instances.channel("fail");
      weather = await instances.channel("weather");
    });
    afterAll(() => instances.stop());

    it("runs the echo flow: HttpAgent receives the text, the flow's state and the run's end", async () => {
      const client = agent(instances, echo);
      const { types, result, events } = await say(client, "hello AG-UI");
      expect(types[0]).toBe(EventType.RUN_STARTED);
      expect(types.at(-1)).toBe(EventType.RUN_FINISHED);
      expect(types).toContain(EventType.TEXT_MESSAGE_START);
      expect(types).toContain(EventType.TEXT_MESSAGE_END);
      expect(events[0]).toMatchObject({ threadId: client.threadId });
      // The agent's messages: the user's, then the reply assembled from the text events.
      expect(result.newMessages).toEqual([expect.objectContaining({ role: "assistant", content: "Echo: hello AG-UI" })]);
      expect(client.state).toEqual({ turn: 1 });
      expect(result.result).toEqual({ echo: "hello AG-UI", turn: 1 });
    });

    it("streams a flow's steps, tool call, tool result and state as it yields them: HttpAgent assembles the assistant's tool call and the tool's message", async () => {
      const client = agent(instances, weather);
      const { events, result } = await say(client, "Lyon");
      const shown = events.map((event) => {
        const { type, ...fields } = event as BaseEvent & Record<string, unknown>;
        if (type === EventType.STEP_STARTED || type === EventType.STEP_FINISHED) return `${type} ${fields.stepName}`;
        if (type === EventType.TOOL_CALL_START)
          return `${type} ${fields.toolCallName} ${fields.toolCallId} parent:${fields.parentMessageId === undefined ? "none" : "text"}`;
        if (type === EventType.TOOL_CALL_ARGS) return `${type} ${fields.delta}`;
        if (type === EventType.TOOL_CALL_RESULT) return `${type} ${fields.toolCallId} ${fields.content}`;
        if (type === EventType.TEXT_MESSAGE_CONTENT) return `${type} ${fields.delta}`;
        if (type === EventType.STATE_SNAPSHOT) return `${type} ${JSON.stringify(fields.snapshot)}`;
        return type;
      });
      expect(shown).toEqual([
        EventType.RUN_STARTED,
        `${EventType.STEP_STARTED} plan`,
        EventType.TEXT_MESSAGE_START,
        `${EventType.TEXT_MESSAGE_CONTENT} Let me look that up.`,
        EventType.TEXT_MESSAGE_END,
        `${EventType.TOOL_CALL_START} weather call_weather_1 parent:text`,
        `${EventType.TOOL_CALL_ARGS} {"city":"Lyon"}`,
        EventType.TOOL_CALL_END,
        `${EventType.STEP_FINISHED} plan`,
        `${EventType.STEP_STARTED} weather`,
        `${EventType.TOOL_CALL_RESULT} call_weather_1 {"city":"Lyon","sky":"sunny"}`,
        `${EventType.STATE_SNAPSHOT} {"lastCity":"Lyon"}`,
        `${EventType.STEP_FINISHED} weather`,
        `${EventType.STEP_STARTED} answer`,
        EventType.TEXT_MESSAGE_START,
        `${EventType.TEXT_MESSAGE_CONTENT} It is sunny in Lyon.`,
        EventType.TEXT_MESSAGE_END,
        `${EventType.STEP_FINISHED} answer`,
        `${EventType.STATE_SNAPSHOT} {"lastCity":"Lyon"}`,
        EventType.RUN_FINISHED,
      ]);
      // The tool call joins the message it followed; the tool's result is a message of its own.
      expect(result.newMessages).toEqual([
        expect.objectContaining({
          role: "assistant",
          content: "Let me look that up.",
          toolCalls: [{ id: "call_weather_1", type: "function", function: { name: "weather", arguments: '{"city":"Lyon"}' } }],
        }),
        expect.objectContaining({ role: "tool", toolCallId: "call_weather_1", content: '{"city":"Lyon","sky":"sunny"}' }),
        expect.objectContaining({ role: "assistant", content: "It is sunny in Lyon." }),
      ]);
      expect(client.state).toEqual({ lastCity: "Lyon" });
      // The history keeps the same: the reply with its tool call, the tool's result, the answer.
      expect(await instances.history(weather.id, client.threadId)).toEqual([
        "user: Lyon",
        "assistant: Let me look that up.",
        'tool: {"city":"Lyon","sky":"sunny"}',
        "assistant: It is sunny in Lyon.",
      ]);
    });

    it("ends a failing flow's run with RUN_ERROR", async () => {
      const errors: string[] = [];
      const types: string[] = [];
      const client = agent(instances, fail);
      client.addMessage({ id: randomUUID(), role: "user", content: "go" });
      // HttpAgent hands RUN_ERROR to its subscribers and resolves with what the run wrote before it.
      const result = await client.runAgent(
        {},
        {
          onEvent: ({ event }) => void types.push(event.type),
          onRunErrorEvent: ({ event }) => void errors.push(event.message),
        },
      );
      expect(result.newMessages).toEqual([expect.objectContaining({ role: "assistant", content: "Working on it" })]);
      expect(types[0]).toBe(EventType.RUN_STARTED);
      expect(types.at(-1)).toBe(EventType.RUN_ERROR);
      expect(types).not.toContain(EventType.RUN_FINISHED);
      expect(errors).toEqual(["flow failed on purpose"]);
    });

    it("continues a thread on the other instance: the second run sees the first in history", async () => {
      const threadId = randomUUID();
      const first = await say(agent(instances, echo, { threadId, to: 0 }), "one");
      expect(first.result.result).toEqual({ echo: "one", turn: 1 });
      const second = await say(agent(instances, echo, { threadId, to: 1 }), "two");
      // The flow's state followed the conversation from one instance to the other.
      expect(second.result.result).toEqual({ echo: "two", turn: 2 });
      expect(await instances.history(echo.id, threadId)).toEqual(["user: one", "assistant: Echo: one", "user: two", "assistant: Echo: two"]);
    });

    it("asks a paused flow's question as its text, and answers it on the thread's next run", async () => {
      const ask = await instances.channel("ask");
      const threadId = randomUUID();
      const first = await say(agent(instances, ask, { threadId }), "hi");
      expect(first.result.newMessages).toEqual([expect.objectContaining({ role: "assistant", content: "What is your name?" })]);
      expect(first.types.at(-1)).toBe(EventType.RUN_FINISHED);
      const second = await say(agent(instances, ask, { threadId, to: 1 }), "Ada");
      expect(second.result.newMessages).toEqual([expect.objectContaining({ role: "assistant", content: "Nice to meet you, Ada!" })]);
    });

    it("stops the run when the client leaves: it is stored cancelled", async () => {
      const slow = await instances.channel("slow");
      const threadId = randomUUID();
      const client = agent(instances, slow, { threadId });
      client.addMessage({ id: randomUUID(), role: "user", content: "go" });
      // The first words arrived: the run is under way when the client aborts.
      await client.runAgent({}, { onTextMessageContentEvent: () => client.abortRun() }).catch(() => undefined);
      const outcome = await instances.runEnds.of(await externalConversationId({ id: slow.id }, threadId));
      expect(outcome.status).toBe("cancelled");
      expect(outcome.produced.map((message) => message.content).join("")).not.toContain("word50");
    });

    it("takes a publishable key from its allowed origins only", async () => {
      const visible = await instances.channel("echo", ["https://app.example"]);
      const from = (origin: string) =>
        new HttpAgent({ url: instances.url(visible.id), headers: { Authorization: `Bearer ${visible.key}`, Origin: origin }, threadId: randomUUID() });
      const allowed = await say(from("https://app.example"), "from the page");
      expect(allowed.result.newMessages).toEqual([expect.objectContaining({ content: "Echo: from the page" })]);
      await expect(say(from("https://elsewhere.example"), "hi")).rejects.toMatchObject({ status: 403, payload: { error: { code: "origin_not_allowed" } } });
    });

    it("refuses a wrong key, and another channel's key, in the contract's envelope", async () => {
      await expect(say(agent(instances, echo, { key: "svc_test_sk_wrongwrongwrongwrongwrongwrong" }), "hi")).rejects.toMatchObject({
        status: 401,
        payload: { error: { code: "invalid_api_key" } },
      });
      await expect(say(agent(instances, echo, { key: fail.key }), "hi")).rejects.toMatchObject({
        status: 401,
        payload: { error: { code: "invalid_api_key" } },
      });
    });

    it("answers a browser's preflight, and is described in the OpenAPI document", async () => {
      const preflight = await fetch(instances.url(echo.id), {
        method: "OPTIONS",
        headers: { origin: "https://app.example", "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type" },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
      const document = (await (await fetch(`${instances.servers[0]?.url}/public/v1/openapi.json`)).json()) as {
        paths: Record<string, { post?: { operationId?: string } }>;
      };
      expect(document.paths["/channels/agui/{channel_id}"]?.post?.operationId).toBe("aguiRun");
    });

    it("refuses a body that is not AG-UI's run input with 422", async () => {
      const response = await fetch(instances.url(echo.id), {
        method: "POST",
        headers: { authorization: `Bearer ${echo.key}`, "content-type": "application/json" },
        body: JSON.stringify({ threadId: "t" }),
      });
      expect(response.status).toBe(422);
      expect(await response.json()).toMatchObject({ error: { code: "validation_error" } });
    });
  });
}

aguiTests("SQLite", sqliteDatabase);
describeWithPostgres("AG-UI channels on Postgres", (serverUrl) => aguiTests("Postgres", () => postgresDatabase(serverUrl)));
