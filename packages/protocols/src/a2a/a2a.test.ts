import { type Task, TaskState } from "@a2a-js/sdk";
import { externalConversationId } from "@channelkit/core";
import { describeWithPostgres } from "@channelkit/testkit";
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type A2aTestChannel, postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances, userMessage } from "./test-services.js";

const SECRET_KEY = "c8".repeat(32);

/** The text of a task's `reply` artifact. */
function replyOf(task: Task): string {
  return (task.artifacts[0]?.parts ?? []).map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");
}

/** The text of a task's status message. */
function statusText(task: Task): string {
  return (task.status?.message?.parts ?? []).map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");
}

/** The answer of `SendMessage`, a task (this agent always answers one). */
function asTask(result: unknown): Task {
  expect(result).toHaveProperty("status");
  return result as Task;
}

function a2aTests(name: string, database: () => Promise<TestDatabase>) {
  describe(`A2A channels on ${name}`, () => {
    const instances = new TwoInstances();
    let echo: A2aTestChannel;
    let ask: A2aTestChannel;
    let slow: A2aTestChannel;
    let fail: A2aTestChannel;
    let handover: A2aTestChannel;

    beforeAll(async () => {
      await instances.start(await database(), SECRET_KEY);
      echo = await instances.channel("echo", {
        name: "Echo agent",
        description: "Echoes what it is told.",
        skills: [{ id: "echo", name: "Echo", description: "Says it back.", tags: ["test"] }],
      });
      ask = await instances.channel("ask");
      slow = await instances.channel("slow");
      fail = await instances.channel("fail");
      handover = await instances.channel("handover");
    });
    afterAll(() => instances.stop());

    it("reads the agent card with the SDK's client: settings, endpoint, streaming, bearer", async () => {
      const client = await instances.connect(echo);
      const card = await client.getAgentCard();
      expect(card).toMatchObject({ name: "Echo agent", description: "Echoes what it is told.", capabilities: { streaming: true } });
      expect(card.skills.map((skill) => [skill.id, skill.name, skill.description, skill.tags])).toEqual([["echo", "Echo", "Says it back.", ["test"]]]);
      expect(card.supportedInterfaces).toEqual([
        expect.objectContaining({ url: `${instances.url()}/channels/a2a/${echo.id}`, protocolBinding: "JSONRPC", protocolVersion: "1.0" }),
      ]);
      expect(Object.values(card.securitySchemes)[0]?.scheme).toMatchObject({ $case: "httpAuthSecurityScheme", value: { scheme: "Bearer" } });
      // The card needs no key; an unknown channel has none.
      expect((await fetch(`${instances.agentUrl(ask)}.well-known/agent-card.json`)).status).toBe(200);
      expect((await fetch(`${instances.url()}/channels/a2a/00000000-0000-4000-8000-000000000000/.well-known/agent-card.json`)).status).toBe(404);
    });

    it("sends a message and gets the reply as a completed task, readable on the other instance", async () => {
      const task = asTask(await (await instances.connect(echo, { to: 0 })).sendMessage(userMessage("hi")));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(replyOf(task)).toBe("Echo: hi");
      expect(statusText(task)).toBe("Echo: hi");
      expect(task.metadata).toMatchObject({ channelkit_run_id: expect.any(String), channelkit_conversation_id: expect.any(String) });
      const again = await (await instances.connect(echo, { to: 1 })).getTask({ tenant: "", id: task.id });
      expect(again).toMatchObject({ id: task.id, contextId: task.contextId, status: { state: TaskState.TASK_STATE_COMPLETED } });
      expect(replyOf(again)).toBe("Echo: hi");
    });

    it("streams a message: the task, working, the reply's text, completed", async () => {
      const client = await instances.connect(echo);
      const kinds: string[] = [];
      let text = "";
      let last: TaskState | undefined;
      for await (const event of client.sendMessageStream(userMessage("stream me"))) {
        const payload = event.payload;
        if (!payload) continue;
        kinds.push(payload.$case);
        if (payload.$case === "artifactUpdate") {
          const delta = (payload.value.artifact?.parts ?? []).map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");
          text = payload.value.append ? text + delta : delta;
        }
        if (payload.$case === "statusUpdate") last = payload.value.status?.state;
      }
      expect(kinds[0]).toBe("task");
      expect(kinds).toContain("artifactUpdate");
      expect(text).toBe("Echo: stream me");
      expect(last).toBe(TaskState.TASK_STATE_COMPLETED);
    });

    it("continues a context on the other instance: one conversation, its history in order", async () => {
      const contextId = crypto.randomUUID();
      const first = asTask(await (await instances.connect(echo, { to: 0 })).sendMessage(userMessage("one", { contextId })));
      const second = asTask(await (await instances.connect(echo, { to: 1 })).sendMessage(userMessage("two", { contextId })));
      expect([first.contextId, second.contextId]).toEqual([contextId, contextId]);
      expect(second.id).not.toBe(first.id);
      expect(second.metadata?.channelkit_conversation_id).toBe(first.metadata?.channelkit_conversation_id);
      const conversationId = await externalConversationId({ id: echo.id }, contextId);
      expect(first.metadata?.channelkit_conversation_id).toBe(conversationId);
      const history = await fetch(`${instances.url(1)}/public/v1/api/conversations/${conversationId}/messages`, {
        headers: { authorization: `Bearer ${echo.key}` },
      });
      expect(history.status).toBe(200);
      const { messages } = (await history.json()) as { messages: { role: string; content: string }[] };
      expect(messages.map((message) => `${message.role}: ${message.content}`)).toEqual([
        "user: one",
        "assistant: Echo: one",
        "user: two",
        "assistant: Echo: two",
      ]);
    });

    it("answers a paused flow as input-required; the answer in the same task completes it, on the other instance", async () => {
      const question = asTask(await (await instances.connect(ask, { to: 0 })).sendMessage(userMessage("hi")));
      expect(question.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      expect(statusText(question)).toBe("What is your name?");
      const answer = asTask(
        await (await instances.connect(ask, { to: 1 })).sendMessage(userMessage("Ada", { contextId: question.contextId, taskId: question.id })),
      );
      expect(answer.id).toBe(question.id);
      expect(answer.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(statusText(answer)).toBe("Nice to meet you, Ada!");
    });

    it("answers a failing flow as a failed task", async () => {
      const task = asTask(await (await instances.connect(fail)).sendMessage(userMessage("go")));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
      expect(statusText(task)).toBe("flow_error: flow failed on purpose");
    });

    it("cancels a running task: its run stops, the task is canceled", async () => {
      const client = await instances.connect(slow);
      const states: TaskState[] = [];
      let canceled: Task | undefined;
      for await (const event of client.sendMessageStream(userMessage("go"))) {
        const payload = event.payload;
        if (payload?.$case === "statusUpdate" && payload.value.status) states.push(payload.value.status.state);
        // Cancelled once its first words came: the run is in flight.
        if (payload?.$case === "artifactUpdate" && canceled === undefined)
          canceled = await client.cancelTask({ tenant: "", id: payload.value.taskId, metadata: {} });
      }
      expect(canceled?.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect(states.at(-1)).toBe(TaskState.TASK_STATE_CANCELED);
      const runId = canceled?.metadata?.channelkit_run_id as string;
      // The run was stored cancelled before its task was.
      expect((await instances.storages[1]?.findRun(runId))?.status).toBe("cancelled");
    });

    it("cancels a task from the other instance: its run stops where it runs, the stream there ends canceled", async () => {
      const runner = await instances.connect(slow);
      const other = await instances.connect(slow, { to: 1 });
      const states: TaskState[] = [];
      let canceled: Task | undefined;
      for await (const event of runner.sendMessageStream(userMessage("go"))) {
        const payload = event.payload;
        if (payload?.$case === "statusUpdate" && payload.value.status) states.push(payload.value.status.state);
        if (payload?.$case === "artifactUpdate" && canceled === undefined)
          canceled = await other.cancelTask({ tenant: "", id: payload.value.taskId, metadata: {} });
      }
      expect(canceled?.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      // The stream of the instance that ran it ends with the run's own cancel, before its whole reply.
      expect(states.at(-1)).toBe(TaskState.TASK_STATE_CANCELED);
      const run = await instances.storages[0]?.findRun(canceled?.metadata?.channelkit_run_id as string);
      expect(run?.status).toBe("cancelled");
      const task = await runner.getTask({ tenant: "", id: canceled?.id ?? "", historyLength: 0 });
      expect(task.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    });

    it("answers a handover as input-required, the live chat mode in the status's metadata; the next message goes to the person", async () => {
      const client = await instances.connect(handover);
      const events: { state: TaskState | undefined; metadata: unknown }[] = [];
      let contextId = "";
      for await (const event of client.sendMessageStream(userMessage("a person, please"))) {
        if (event.payload?.$case === "task") contextId = event.payload.value.contextId;
        if (event.payload?.$case === "statusUpdate") events.push({ state: event.payload.value.status?.state, metadata: event.payload.value.metadata });
      }
      expect(events.at(-1)).toEqual({ state: TaskState.TASK_STATE_INPUT_REQUIRED, metadata: { channelkit_livechat_mode: "livechat_waiting" } });
      const next = asTask(await (await instances.connect(handover, { to: 1 })).sendMessage(userMessage("hello?", { contextId })));
      expect(next.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      expect(statusText(next)).toBe("");
    });

    it("resubscribes to a running task on its instance: its next events to its end", async () => {
      const client = await instances.connect(slow);
      const stream = client.sendMessageStream(userMessage("go"));
      let taskId = "";
      // Read until the run is in flight (its first words).
      for await (const event of stream) {
        if (event.payload?.$case === "artifactUpdate") {
          taskId = event.payload.value.taskId;
          break;
        }
      }
      const kinds: string[] = [];
      let last: TaskState | undefined;
      for await (const event of client.resubscribeTask({ tenant: "", id: taskId })) {
        kinds.push(event.payload?.$case ?? "");
        if (event.payload?.$case === "statusUpdate") last = event.payload.value.status?.state;
        // Stopped once it is followed: the cancel's end comes through the subscription.
        if (event.payload?.$case === "artifactUpdate" && !kinds.includes("cancelled")) {
          kinds.push("cancelled");
          await client.cancelTask({ tenant: "", id: taskId, metadata: {} });
        }
      }
      expect(kinds[0]).toBe("task");
      expect(kinds).toContain("artifactUpdate");
      expect(last).toBe(TaskState.TASK_STATE_CANCELED);
    });

    it("refuses a wrong key: the contract's status and code in the JSON-RPC error", async () => {
      // The SDK's JsonRpcTransportError: the JSON-RPC code as `envelopeCode`, the contract's code in `data`.
      const refused = { envelopeCode: -32000, data: { code: "invalid_api_key" } };
      await expect((await instances.connect(echo, { key: "svc_sk_live_wrong" })).sendMessage(userMessage("hi"))).rejects.toMatchObject(refused);
      // Another A2A channel's key is no key of this one.
      await expect((await instances.connect(echo, { key: ask.key })).sendMessage(userMessage("hi"))).rejects.toMatchObject(refused);
      const raw = await fetch(`${instances.url()}/channels/a2a/${echo.id}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ask.key}`, "content-type": "application/json", "a2a-version": "1.0" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }),
      });
      expect(raw.status).toBe(401);
      expect(await raw.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000, data: { code: "invalid_api_key" } } });
    });

    it("describes its routes in the service's OpenAPI document, which stays valid", async () => {
      const document = (await (await fetch(`${instances.url()}/public/v1/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { operationId: string }>>;
      };
      expect(document.paths["/channels/a2a/{channel_id}"]?.post?.operationId).toBe("a2aMessage");
      expect(document.paths["/channels/a2a/{channel_id}/.well-known/agent-card.json"]?.get?.operationId).toBe("a2aAgentCard");
      const result = await new Validator().validate(document as unknown as Parameters<Validator["validate"]>[0]);
      expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    });
  });
}

a2aTests("SQLite", sqliteDatabase);

describeWithPostgres("A2A channels on Postgres", (serverUrl) => {
  a2aTests("Postgres", () => postgresDatabase(serverUrl));
});
