import { randomUUID } from "node:crypto";
import { type ChannelService, createChannelService, memoryStorage, type Storage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type RunningServer, serve } from "@channelkit/node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type Connection, loadHistory, resumeChat, startChat } from "./api.js";
import { chatEvents, readReply } from "./stream.js";

/*
 * The resume route as the widget reads it, against a real service on 127.0.0.1 (memory
 * storage, the `slow` demo flow: 50 words, 100 ms apart): a reply whose connection was lost
 * comes back whole, from its first event, on a channel with resumable streams; a channel
 * without them offers nothing to resume.
 */

const WHOLE_REPLY = Array.from({ length: 50 }, (_, index) => `word${index + 1}`).join(" ");

let storage: Storage;
let service: ChannelService;
let server: RunningServer;
let resumable: Connection;
let plain: Connection;

beforeAll(async () => {
  storage = memoryStorage();
  service = await createChannelService({ storage, flows: demoFlows, secretKey: "ef".repeat(32) });
  server = await serve(service, { port: 0 });
  const { tenant } = await service.admin.createTenant({ name: "Shop" });
  const channel = (resumableStreams: boolean) =>
    service.admin.createChannel({ tenantId: tenant.id, mode: "public", allowedOrigins: ["https://shop.example"], flow: "slow", resumableStreams });
  resumable = { endpoint: server.url, key: (await channel(true)).api_key };
  plain = { endpoint: server.url, key: (await channel(false)).api_key };
});

afterAll(async () => {
  await server?.close();
  await service?.close();
});

/** Sends `payload` and drops the connection after `words` deltas, as a lost network would; the run's ids. */
async function sendAndDrop(connection: Connection, payload: string, words: number): Promise<{ run_id: string; conversation_id: string }> {
  const controller = new AbortController();
  const body = await startChat(connection, { payload }, controller.signal);
  let run = { run_id: "", conversation_id: "" };
  let seen = 0;
  try {
    for await (const event of chatEvents(body)) {
      if (event.type === "data-run") run = event.data;
      if (event.type === "text-delta" && ++seen === words) controller.abort();
      expect(event.type).not.toBe("finish");
    }
  } catch (error) {
    expect((error as Error).name).toBe("AbortError");
  }
  expect(run.conversation_id).toMatch(/^[0-9a-f-]{36}$/);
  return run;
}

const runStatus = async (runId: string) => (await storage.findRun(runId))?.status;

async function history(connection: Connection, conversationId: string): Promise<string[]> {
  const found = await loadHistory(connection, conversationId, new AbortController().signal);
  return (found?.messages ?? []).map((message) => `${message.role}: ${message.content}`);
}

describe("resumeChat", () => {
  it("is null (204) for a conversation with no run in flight", async () => {
    expect(await resumeChat(resumable, randomUUID(), new AbortController().signal)).toBeNull();
  });

  it("replays a run whose connection was lost from its first event, then the rest live, to its finish; null once it ended", async () => {
    const { run_id: runId, conversation_id: conversationId } = await sendAndDrop(resumable, "Tell me a story", 3);
    // In flight: the user's message is in the history, not the reply.
    expect(await history(resumable, conversationId)).toEqual(["user: Tell me a story"]);
    const body = await resumeChat(resumable, conversationId, new AbortController().signal);
    expect(body).not.toBeNull();
    const events: string[] = [];
    const outcome = await readReply(body as ReadableStream<Uint8Array>, {
      conversation: (id) => events.push(`conversation ${id}`),
      start: (id) => events.push(`start ${id}`),
      delta: () => events.push("delta"),
    });
    expect(outcome).toEqual({ status: "finished", replies: [WHOLE_REPLY] });
    // The whole stream again: data-run first, then every word, the ones sent before the loss included.
    expect(events[0]).toBe(`conversation ${conversationId}`);
    expect(events.filter((event) => event === "delta")).toHaveLength(50);
    expect(await resumeChat(resumable, conversationId, new AbortController().signal)).toBeNull();
    expect(await runStatus(runId)).toBe("success");
    expect(await history(resumable, conversationId)).toEqual(["user: Tell me a story", `assistant: ${WHOLE_REPLY}`]);
  });

  it("without resumable streams, a lost connection cancels the run: nothing to resume, and its partial reply is stored like a whole one", async () => {
    const { run_id: runId, conversation_id: conversationId } = await sendAndDrop(plain, "Tell me a story", 3);
    expect(await resumeChat(plain, conversationId, new AbortController().signal)).toBeNull();
    await vi.waitFor(async () => expect(await runStatus(runId)).toBe("cancelled"));
    // The history does not tell a cut reply from a finished one: after a 204, the widget
    // shows the loss rather than take the stored reply as complete.
    const [user, assistant, ...rest] = await history(plain, conversationId);
    expect(user).toBe("user: Tell me a story");
    expect(assistant).toMatch(/^assistant: word1 word2 word3 /);
    expect(WHOLE_REPLY.startsWith(assistant?.slice("assistant: ".length) ?? "")).toBe(true);
    expect(assistant).not.toContain("word50");
    expect(rest).toEqual([]);
  });
});
