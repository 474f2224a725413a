import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { readSse, readWithAiSdk } from "../../../testkit/src/sse.js";
import { afterEach, describe, expect, it } from "vitest";
import { demoFlows } from "../flows/demo.js";
import { liveChatInbox } from "../livechat/inbox/plugin.js";
import type { LiveChatProvider } from "../livechat/provider.js";
import { type ChannelService, createChannelService } from "../service.js";
import { memoryStorage } from "../storage/memory.js";
import type { StartedRun } from "./start.js";
import { uiMessageStream } from "./ui-stream.js";

const quiet = { warn() {}, error() {} };

let service: ChannelService | undefined;
afterEach(async () => {
  await service?.close();
  service = undefined;
});

/** A service on the memory storage with a channel bound to `flow`, and a streamed execute on it. */
async function setup(flow: string, options: { livechat?: LiveChatProvider; resumableStreams?: boolean } = {}) {
  service = await createChannelService({
    storage: memoryStorage(),
    flows: demoFlows,
    logger: quiet,
    ...(options.livechat ? { livechat: options.livechat } : {}),
  });
  const s = service;
  const { tenant } = await s.admin.createTenant({ name: "Acme" });
  const { api_key: key } = await s.admin.createChannel({ tenantId: tenant.id, flow, resumableStreams: options.resumableStreams ?? false });
  const call = (path: string, init: RequestInit = {}) =>
    s.handler(new Request(`http://test${path}`, { ...init, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } }));
  const stream = (payload: string, conversationId?: string) =>
    call("/public/v1/api/execute", {
      method: "POST",
      body: JSON.stringify({ payload, stream: true, ...(conversationId ? { conversation_id: conversationId } : {}) }),
    });
  return { call, stream };
}

/** The `data-run` ids of a stream's events. */
function idsOf(events: { type: string }[]): { run_id: string; conversation_id: string } {
  const first = events[0] as { type: string; data?: { run_id: string; conversation_id: string } };
  if (first?.type !== "data-run" || !first.data) throw new Error(`first event: ${JSON.stringify(first)}`);
  return first.data;
}

describe("the finish event carries the run's outcome (messageMetadata)", () => {
  it("a run that completed: status success, livechat_mode null, read by the AI SDK's client as the message's metadata", async () => {
    const { stream } = await setup("echo");
    const { events } = await readSse(await stream("hello"));
    expect(events.at(-1)).toEqual({ type: "finish", finishReason: "stop", messageMetadata: { status: "success", livechat_mode: null } });

    const message = await readWithAiSdk(await stream("hello again"));
    expect(message.metadata).toEqual({ status: "success", livechat_mode: null });
    expect(message.parts.some((part) => part.type === "text" && part.text === "Echo: hello again")).toBe(true);
  });

  it("a run that paused (the flow asked a question) is pending, and the run that resumes it a success", async () => {
    const { stream } = await setup("ask");
    const first = await readSse(await stream("hi"));
    expect(first.events.at(-1)).toEqual({ type: "finish", finishReason: "stop", messageMetadata: { status: "pending", livechat_mode: null } });

    const message = await readWithAiSdk(await stream("Ada", idsOf(first.events).conversation_id));
    expect(message.metadata).toEqual({ status: "success", livechat_mode: null });
  });

  it("a run that handed over is pending with livechat_mode livechat_waiting, and so is a message while a human has the conversation", async () => {
    const { stream } = await setup("handover", { livechat: liveChatInbox({ secret: "s".repeat(32) }) });
    const handedOver = await readWithAiSdk(await stream("I want a human"));
    expect(handedOver.metadata).toEqual({ status: "pending", livechat_mode: "livechat_waiting" });

    const first = await readSse(await stream("I want a human too"));
    expect(first.events.at(-1)).toEqual({
      type: "finish",
      finishReason: "stop",
      messageMetadata: { status: "pending", livechat_mode: "livechat_waiting" },
    });
    // The flow does not run while waiting: data-run, then finish, with the mode now.
    const waiting = await readSse(await stream("anyone there?", idsOf(first.events).conversation_id));
    expect(waiting.events.map((event) => event.type)).toEqual(["data-run", "finish"]);
    expect(waiting.events.at(-1)).toMatchObject({ messageMetadata: { status: "pending", livechat_mode: "livechat_waiting" } });
    const read = await readWithAiSdk(await stream("still there?", idsOf(first.events).conversation_id));
    expect(read.metadata).toEqual({ status: "pending", livechat_mode: "livechat_waiting" });
  });

  it("a handover with no live chat configured is a success, as the JSON answer says", async () => {
    const { stream } = await setup("handover");
    const message = await readWithAiSdk(await stream("I want a human"));
    expect(message.metadata).toEqual({ status: "success", livechat_mode: null });
  });

  it("a resumable stream cancelled from another request ends, for its readers, with status cancelled", async () => {
    const { call, stream } = await setup("slow", { resumableStreams: true });
    const response = await stream("take your time");
    const reader = response.body?.getReader();
    if (!reader) throw new Error("no body");
    const { value } = await reader.read();
    const first = new TextDecoder().decode(value);
    const ids = JSON.parse(first.slice(first.indexOf("{"), first.indexOf("\n"))) as { data: { conversation_id: string } };
    await reader.cancel();
    const conversation = ids.data.conversation_id;
    const follower = await call(`/public/v1/api/conversations/${conversation}/stream`);
    expect(follower.status).toBe(200);
    expect((await call(`/public/v1/api/conversations/${conversation}/cancel`, { method: "POST" })).status).toBe(200);
    const message = await readWithAiSdk(follower);
    expect(message.metadata).toEqual({ status: "cancelled", livechat_mode: null });
  });
});

describe("memory per open stream (docs/benchmarks.md)", () => {
  it("a stream waiting for its run's next step keeps no async frame and no dictionary", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const count = 5000;
    // Runs whose next step never comes, made before the measurement.
    const never = new Promise<never>(() => undefined);
    const runs: StartedRun[] = Array.from({ length: count }, (_, i) => ({
      runId: `run-${i}`,
      conversationId: `conversation-${i}`,
      steps: { next: () => never },
      cancel: () => undefined,
      endStream: () => undefined,
    }));
    // What the adapter keeps while it waits: the promise of the next frame, and through it the stream.
    const waiting: unknown[] = new Array(count);
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < count; i++) {
      const stream = uiMessageStream(runs[i] as StartedRun, quiet);
      expect(typeof stream.pull()).toBe("string");
      waiting[i] = stream.pull();
    }
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    gc();
    const perStream = (process.memoryUsage().heapUsed - before) / count;
    // About 320 bytes; an object literal with a getter (a dictionary) waiting in an async function, 580.
    expect(perStream).toBeLessThan(400);
    expect(waiting.length).toBe(count);
  });
});
