import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { EXECUTE_PATH, history, readHistory, runJson, storedRun, waitFor } from "./client.js";
import type { HeldCall, StorageGate } from "./gate.js";
import type { Harness } from "./harness.js";

/** Fails with `what` rather than hanging when `promise` does not settle in time. */
async function within<T>(promise: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sends an execute over a socket of its own, whole (or only its first `sentBytes` bytes of
 * body), waits until the service reaches `held`, and goes away there: the socket is closed
 * while the service is stopped at that point. The service then answers a request sent after
 * the client left (a history read, a storage round trip), so it has read the end of the
 * client's connection, and only then is the held call released.
 */
async function leaveAt(h: Harness, key: string, body: Record<string, unknown>, held: HeldCall, sentBytes?: number): Promise<unknown[]> {
  const url = new URL(h.url(EXECUTE_PATH));
  const raw = Buffer.from(JSON.stringify(body));
  const head =
    `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${raw.byteLength}\r\n\r\n`;
  const socket = connect(Number(url.port), url.hostname);
  socket.on("error", () => undefined);
  socket.write(Buffer.concat([Buffer.from(head), sentBytes === undefined ? raw : raw.subarray(0, sentBytes)]));
  const args = await within(held.reached, "the service did not reach the held point");
  await new Promise<void>((resolve) => socket.end(resolve));
  socket.destroy();
  const after = await history(h, key, randomUUID());
  await after.arrayBuffer();
  held.release();
  return args;
}

/** The run that stored the user message `payload` in `conversationId`, once it is stored. */
async function runOf(h: Harness, key: string, conversationId: string, payload: string) {
  const message = await waitFor(async () => {
    // A new conversation is written with the run's ticket: until then its history is a 404.
    const response = await history(h, key, conversationId, { limit: "200" });
    if (response.status === 404) return null;
    const { messages } = (await response.json()) as Awaited<ReturnType<typeof readHistory>>;
    return messages.find((m) => m.role === "user" && m.content === payload) ?? null;
  });
  expect(message.run_id).toBeTruthy();
  return storedRun(h.target.storage, message.run_id as string);
}

/**
 * What a client that leaves leaves behind (docs/reliability.md, "A client that leaves"):
 * every execute whose body arrived whole is stored in its conversation's turn, its user
 * message and its run `cancelled`, whatever point the service had reached when the client
 * left; one whose body did not arrive whole stores nothing. Each case holds the service at
 * one point of the request ({@link StorageGate}) while its client goes away.
 */
export function leavingClientTests(h: Harness, gate: StorageGate): void {
  describe("clients that leave, at each point of their request", () => {
    for (const stream of [true, false]) {
      const answer = stream ? "streamed" : "JSON";

      it(`${answer}: left during the key lookup: stored cancelled, in an existing conversation and a new one`, async () => {
        const channel = await h.channel({ flow: "echo" });
        const first = await runJson(h, channel.key, { payload: "first" });
        await leaveAt(h, channel.key, { payload: "left at the key", conversation_id: first.conversation_id, stream }, gate.hold("findKeyByHash"));
        expect(await runOf(h, channel.key, first.conversation_id, "left at the key")).toMatchObject({ status: "cancelled" });

        // A new conversation: its id is learnt from the run's write (a JSON answer's is one write at its end).
        const written = gate.watch(stream ? "beginRun" : "storeRun");
        await leaveAt(h, channel.key, { payload: "new, left at the key", stream }, gate.hold("findKeyByHash"));
        const [claim] = (await within(written, "the run was never stored")) as [{ conversation: { id: string } }];
        expect(await runOf(h, channel.key, claim.conversation.id, "new, left at the key")).toMatchObject({ status: "cancelled" });

        const { messages } = await readHistory(h, channel.key, first.conversation_id);
        expect(messages.map((m) => [m.turn_index, m.role, m.content])).toEqual([
          [0, "user", "first"],
          [1, "assistant", "Echo: first"],
          [2, "user", "left at the key"],
        ]);
      });

      it(`${answer}: left while its ticket was taken: stored cancelled in its turn, and the next run answers at once`, async () => {
        const channel = await h.channel({ flow: "echo" });
        const first = await runJson(h, channel.key, { payload: "first" });
        await leaveAt(h, channel.key, { payload: "left at the ticket", conversation_id: first.conversation_id, stream }, gate.hold("beginRun"));
        expect(await runOf(h, channel.key, first.conversation_id, "left at the ticket")).toMatchObject({ status: "cancelled" });
        const next = await runJson(h, channel.key, { payload: "next", conversation_id: first.conversation_id });
        expect(next.status).toBe("success");
        const { messages } = await readHistory(h, channel.key, first.conversation_id);
        expect(messages.map((m) => [m.turn_index, m.role, m.content])).toEqual([
          [0, "user", "first"],
          [1, "assistant", "Echo: first"],
          [2, "user", "left at the ticket"],
          [3, "user", "next"],
          [4, "assistant", "Echo: next"],
        ]);
      });
    }

    it("streamed: left while the new conversation's ticket was taken: the conversation holds the message, cancelled", async () => {
      const channel = await h.channel({ flow: "echo" });
      const [claim] = (await leaveAt(h, channel.key, { payload: "new, left at the ticket", stream: true }, gate.hold("beginRun"))) as [
        { conversation: { id: string } },
      ];
      expect(await runOf(h, channel.key, claim.conversation.id, "new, left at the ticket")).toMatchObject({ status: "cancelled" });
    });

    it("left before its body arrived whole: nothing is stored, and the conversation goes on", async () => {
      const channel = await h.channel({ flow: "echo" });
      const first = await runJson(h, channel.key, { payload: "first" });
      await leaveAt(h, channel.key, { payload: "never whole", conversation_id: first.conversation_id, stream: true }, gate.hold("findKeyByHash"), 10);
      // The next run takes the turn after the first one's: the one whose body was cut took none.
      const next = await runJson(h, channel.key, { payload: "next", conversation_id: first.conversation_id });
      expect(next.status).toBe("success");
      const { messages } = await readHistory(h, channel.key, first.conversation_id);
      expect(messages.map((m) => m.content)).toEqual(["first", "Echo: first", "next", "Echo: next"]);
    });
  });
}
