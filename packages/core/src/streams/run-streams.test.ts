import { describe, expect, it } from "vitest";
import { defineFlow } from "../flows/define.js";
import { demoFlows } from "../flows/demo.js";
import { text } from "../flows/events.js";
import { inProcessFeed } from "../livechat/feed.js";
import { type ChannelService, createChannelService } from "../service.js";
import { memoryStorage } from "../storage/memory.js";
import type { LiveFeed, RunStreamStore, Storage } from "../storage/types.js";

/*
 * What the HTTP tests cannot make happen: a database write that fails, a doorbell that is
 * lost. Two services on one storage stand for two instances on one database.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Three words, 60 ms apart: three chunks of a recorded stream. */
const words = defineFlow({
  name: "words",
  async *run() {
    for (const word of ["one ", "two ", "three"]) {
      await sleep(60);
      yield text(word);
    }
    return null;
  },
});

/** Thinks 400 ms before its one word: a run with nothing to record at first. */
const thinking = defineFlow({
  name: "thinking",
  async *run() {
    await sleep(400);
    yield text("done");
    return null;
  },
});

/** A feed that loses every message on topics starting with `lost`. */
function lossyFeed(lost: string): LiveFeed {
  const feed = inProcessFeed();
  return {
    publish: (topic, message) => (topic.startsWith(lost) ? Promise.resolve() : feed.publish(topic, message)),
    subscribe: (topic, listener) => feed.subscribe(topic, listener),
    close: () => feed.close(),
  };
}

async function twoInstances(storage: Storage, leaseMs = 30_000) {
  const quiet = { warn: () => undefined, error: () => undefined };
  const [a, b] = (await Promise.all(
    [0, 1].map(() => createChannelService({ storage, flows: [...demoFlows, words, thinking], logger: quiet, turnLeaseMs: leaseMs })),
  )) as [ChannelService, ChannelService];
  const { tenant } = await a.admin.createTenant({ name: "Streams" });
  const channel = async (flow: string) => (await a.admin.createChannel({ tenantId: tenant.id, flow, resumableStreams: true })).api_key;
  const call = (service: ChannelService, key: string, path: string, body?: unknown) =>
    service.handler(
      new Request(`http://test${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        ...(body === undefined || body === null ? {} : { body: JSON.stringify(body) }),
      }),
    );
  const close = async () => {
    await a.close();
    await b.close();
  };
  return { a, b, channel, call, close };
}

/** The stream's first event (its run and conversation), leaving the rest unread. */
async function opening(response: Response) {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  let seen = "";
  while (!seen.includes("\n\n")) seen += new TextDecoder().decode((await reader.read()).value);
  const first = JSON.parse(seen.slice(6, seen.indexOf("\n\n"))) as { data: { run_id: string; conversation_id: string } };
  return { ...first.data, reader };
}

describe("resumable streams", () => {
  it("keeps the events of a write that failed and records them with the next one: the recorded stream is the one sent", async () => {
    const storage = memoryStorage();
    const store = storage.runStreams as RunStreamStore;
    let failures = 1;
    const flaky: Storage = {
      ...storage,
      runStreams: {
        ...store,
        append: (...args) => (failures-- > 0 ? Promise.reject(new Error("database away")) : store.append(...args)),
      },
    };
    const { a, channel, call, close } = await twoInstances(flaky);
    try {
      const key = await channel("words");
      const response = await call(a, key, "/public/v1/api/execute", { payload: "go", stream: true });
      // Followed from its first event, as a resume does: its completion keeps its last events.
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let sent = "";
      while (!sent.includes("\n\n")) sent += decoder.decode((await reader.read()).value, { stream: true });
      const runId = (JSON.parse(sent.slice(6, sent.indexOf("\n\n"))) as { data: { run_id: string } }).data.run_id;
      expect(await store.follow?.(runId)).toBe(true);
      for (let read = await reader.read(); !read.done; read = await reader.read()) sent += decoder.decode(read.value, { stream: true });
      expect(sent).toContain('"delta":"three"');
      let recorded = await store.read(runId, 0);
      for (let waited = 0; !recorded?.stream.ended && waited < 3000; waited += 20) {
        await sleep(20);
        recorded = await store.read(runId, 0);
      }
      expect(failures).toBeLessThanOrEqual(0);
      expect(recorded?.stream.ended).toBe(true);
      // Everything after data-run, which a follower makes from the stream's ids.
      expect((recorded?.chunks.map((chunk) => chunk.frames).join("") ?? "") + recorded?.last).toBe(sent.slice(sent.indexOf("\n\n") + 2));
    } finally {
      await close();
    }
  });

  it("renews a stream at its first tick, events or not, which puts it in the sweep's watch; a stream that ends sooner is never renewed", async () => {
    const storage = memoryStorage();
    const store = storage.runStreams as RunStreamStore;
    const renewed: string[] = [];
    const watching: Storage = {
      ...storage,
      runStreams: {
        ...store,
        renew: (runIds, aliveUntil) => {
          renewed.push(...runIds);
          return store.renew(runIds, aliveUntil);
        },
      },
    };
    const { a, channel, call, close } = await twoInstances(watching);
    try {
      const short = await (await call(a, await channel("echo"), "/public/v1/api/execute", { payload: "hi", stream: true })).text();
      const shortRun = (JSON.parse(short.slice(6, short.indexOf("\n\n"))) as { data: { run_id: string } }).data.run_id;
      const long = await opening(await call(a, await channel("thinking"), "/public/v1/api/execute", { payload: "go", stream: true }));
      await sleep(120);
      expect(renewed).toContain(long.run_id);
      expect(renewed).not.toContain(shortRun);
      // Renewed, the stream is the sweep's once its lease passes (its instance gone).
      const lapsed = await store.endLapsed(new Date(Date.now() + 3_600_000).toISOString(), "lost");
      expect(lapsed.map((stream) => stream.runId)).toEqual([long.run_id]);
      await long.reader.cancel();
    } finally {
      await close();
    }
  });

  it("a cancel asked on another instance whose doorbell is lost is picked up when the stream is renewed", async () => {
    const storage = { ...memoryStorage(), feed: lossyFeed("run-cancel:") };
    const { a, b, channel, call, close } = await twoInstances(storage, 300);
    try {
      const key = await channel("slow");
      const { conversation_id, run_id, reader } = await opening(await call(a, key, "/public/v1/api/execute", { payload: "go", stream: true }));
      const started = Date.now();
      const cancelled = await call(b, key, `/public/v1/api/conversations/${conversation_id}/cancel`, null);
      expect(cancelled.status).toBe(200);
      expect(await cancelled.json()).toEqual({ run_id, conversation_id, status: "cancelled" });
      expect(Date.now() - started).toBeLessThan(2000);
      let rest = "";
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
      expect(rest).toMatch(/"type":"finish"/);
      expect(rest).not.toContain("word50");
    } finally {
      await close();
    }
  });

  it("a follower on another instance reads the whole stream as it is recorded, the same bytes as the run's client", async () => {
    const storage = memoryStorage();
    const { a, b, channel, call, close } = await twoInstances(storage);
    try {
      const key = await channel("words");
      const original = await call(a, key, "/public/v1/api/execute", { payload: "go", stream: true });
      const { conversation_id } = await opening(original.clone());
      const resumed = await call(b, key, `/public/v1/api/conversations/${conversation_id}/stream`);
      expect(resumed.status).toBe(200);
      expect(await resumed.text()).toBe(await original.text());
    } finally {
      await close();
    }
  });
});
