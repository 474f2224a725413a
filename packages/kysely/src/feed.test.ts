import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LiveFeed } from "@channelkit/core";
import { createTestDatabase, describeWithPostgres, type TestDatabase } from "@channelkit/testkit";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { postgres } from "./postgres.js";
import { sqlite } from "./sqlite.js";
import type { KyselyStorage } from "./storage.js";

const open: KyselyStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((storage) => storage.close()));
});

interface Received {
  messages: string[];
  /** Resolves once `count` messages came; rejects after `ms`. */
  wait(ms?: number): Promise<void>;
  stop(): void;
}

/** Subscribes to `topic` on `feed`, collecting what it delivers. */
async function receive(feed: LiveFeed | undefined, topic: string, count: number): Promise<Received> {
  if (!feed) throw new Error("this storage has no feed");
  const messages: string[] = [];
  let done: () => void = () => undefined;
  const arrived = new Promise<void>((resolve) => {
    done = resolve;
  });
  const stop = await feed.subscribe(topic, (message) => {
    messages.push(message);
    if (messages.length >= count) done();
  });
  const wait = (ms = 2000) =>
    Promise.race([arrived, new Promise<void>((_, reject) => setTimeout(() => reject(new Error(`only ${messages.length} of ${count} arrived`)), ms))]);
  return { messages, wait, stop };
}

/** The feed behaviours every store's feed has, between two instances on one database. */
function feedContract(name: string, twoInstances: () => Promise<[KyselyStorage, KyselyStorage]>) {
  describe(`the live feed between two instances: ${name}`, () => {
    it("delivers what one instance publishes to subscribers on both, in order, by topic", async () => {
      const [a, b] = await twoInstances();
      const topic = `conversation:${randomUUID()}`;
      const onB = await receive(b.feed, topic, 3);
      const onA = await receive(a.feed, topic, 3);
      const elsewhere = await receive(b.feed, "conversation:other", 1);
      const started = Date.now();
      for (const message of ["one", "two", "three"]) await a.feed?.publish(topic, message);
      await onB.wait();
      await onA.wait();
      expect(Date.now() - started).toBeLessThan(1000);
      expect(onB.messages).toEqual(["one", "two", "three"]);
      expect(onA.messages).toEqual(["one", "two", "three"]);
      expect(elsewhere.messages).toEqual([]);
      elsewhere.stop();
    });

    it("stops delivering after unsubscribe, and refuses a message larger than a doorbell", async () => {
      const [a, b] = await twoInstances();
      const topic = `conversation:${randomUUID()}`;
      const first = await receive(b.feed, topic, 1);
      await a.feed?.publish(topic, "before");
      await first.wait();
      first.stop();
      const still = await receive(b.feed, `${topic}:other`, 1);
      await a.feed?.publish(topic, "after");
      await a.feed?.publish(`${topic}:other`, "elsewhere");
      await still.wait();
      expect(first.messages).toEqual(["before"]);
      await expect(a.feed?.publish(topic, "x".repeat(5000))).rejects.toThrow(/at most 4000 bytes/);
      still.stop();
    });
  });
}

const files: string[] = [];
afterAll(async () => {
  await Promise.all(files.flatMap((file) => ["", "-wal", "-shm"].map((suffix) => rm(`${file}${suffix}`, { force: true }))));
});

feedContract("SQLite (a table, polled)", async () => {
  const file = join(tmpdir(), `channelkit-feed-${randomUUID()}.db`);
  files.push(file);
  const a = sqlite(file);
  await a.migrate();
  const b = sqlite(file);
  open.push(a, b);
  return [a, b];
});

describeWithPostgres("Postgres", (serverUrl) => {
  const databases: TestDatabase[] = [];
  afterAll(async () => {
    await Promise.all(databases.map((database) => database.drop()));
  });
  feedContract("Postgres (LISTEN/NOTIFY)", async () => {
    const database = await createTestDatabase(serverUrl);
    databases.push(database);
    const a = postgres(database.url);
    await a.migrate();
    const b = postgres(database.url);
    open.push(a, b);
    return [a, b];
  });
});
