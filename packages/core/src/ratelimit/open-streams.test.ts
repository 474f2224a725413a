import { describe, expect, it } from "vitest";
import { isServiceError } from "../http/errors.js";
import type { Reply, ReplyChunk, ReplyStream } from "../http/reply.js";
import type { KeyWithChannel } from "../storage/types.js";
import { OpenStreams } from "./open-streams.js";

const publishable = (id: string) => ({ key: { id, prefix: "svc_pub_" } }) as unknown as KeyWithChannel;
const server = (id: string) => ({ key: { id, prefix: "svc_live_" } }) as unknown as KeyWithChannel;
const from = (address: string) => ({ headers: { get: () => null }, clientAddress: address });

/** A stream that answers `chunks` then null, each after a wait. */
function stream(chunks: ReplyChunk[] = [], fail = false): ReplyStream & { cancelled: boolean } {
  const left = [...chunks];
  return {
    cancelled: false,
    pull: () => (fail ? Promise.reject(new Error("broken")) : Promise.resolve(left.shift() ?? null)),
    cancel() {
      this.cancelled = true;
    },
  };
}
const streamed = (body: ReplyStream): Reply => ({ status: 200, headers: {}, body });

async function refusal(opening: Promise<unknown>): Promise<{ code: string; headers: Record<string, string> | undefined }> {
  const error = await opening.then(
    () => null,
    (reason: unknown) => reason,
  );
  if (!isServiceError(error)) throw new Error(`expected a refusal, got ${String(error)}`);
  return { code: error.code, headers: error.headers };
}

describe("OpenStreams", () => {
  it("refuses past the cap of a key with 429 too_many_streams and Retry-After, and gives a slot back on a cancel, the last chunk and a failure", async () => {
    const caps = new OpenStreams({ perKey: 2, perAddress: false }, (request) => request.clientAddress);
    const a = (await caps.forKey(from("1"), server("k"), () => streamed(stream(["x"])))).body as ReplyStream;
    const b = (await caps.forKey(from("1"), server("k"), () => streamed(stream([], true)))).body as ReplyStream;
    expect(caps.openFor("k")).toBe(2);
    const refused = await refusal(caps.forKey(from("2"), server("k"), () => streamed(stream())));
    expect(refused.code).toBe("too_many_streams");
    expect(refused.headers).toEqual({ "retry-after": "5" });
    // Another key is not counted with this one.
    await caps.forKey(from("1"), server("other"), () => streamed(stream()));

    expect(await a.pull()).toBe("x");
    expect(caps.openFor("k")).toBe(2);
    expect(await a.pull()).toBeNull();
    expect(caps.openFor("k")).toBe(1);
    await expect(b.pull()).rejects.toThrow("broken");
    expect(caps.openFor("k")).toBe(0);

    const c = (await caps.forKey(from("1"), server("k"), () => streamed(stream(["y"])))).body as ReplyStream & { cancelled?: boolean };
    expect(caps.openFor("k")).toBe(1);
    c.cancel();
    c.cancel();
    expect(caps.openFor("k")).toBe(0);
  });

  it("gives the slot back when the answer is not a stream or fails before it is one", async () => {
    const caps = new OpenStreams({ perKey: 1, perAddress: false }, () => undefined);
    await caps.forKey(from("1"), server("k"), () => ({ status: 204, headers: {}, body: null }));
    expect(caps.openFor("k")).toBe(0);
    await expect(
      caps.forKey(from("1"), server("k"), () => {
        throw new Error("no run");
      }),
    ).rejects.toThrow("no run");
    expect(caps.openFor("k")).toBe(0);
  });

  it("counts publishable keys per client address too, not server keys or agents", async () => {
    const caps = new OpenStreams({ perKey: false, perAddress: 1 }, (request) => request.clientAddress);
    await caps.forKey(from("203.0.113.1"), publishable("p1"), () => streamed(stream()));
    expect((await refusal(caps.forKey(from("203.0.113.1"), publishable("p2"), () => streamed(stream())))).code).toBe("too_many_streams");
    await caps.forKey(from("203.0.113.2"), publishable("p2"), () => streamed(stream()));
    await caps.forKey(from("203.0.113.1"), server("s"), () => streamed(stream()));
    await caps.forAgent("tenant", "agent", () => streamed(stream()));
  });

  it("counts agents per tenant and subject", async () => {
    const caps = new OpenStreams({ perKey: 1, perAddress: false }, () => undefined);
    await caps.forAgent("t1", "ann", () => streamed(stream()));
    expect((await refusal(caps.forAgent("t1", "ann", () => streamed(stream())))).code).toBe("too_many_streams");
    await caps.forAgent("t2", "ann", () => streamed(stream()));
    await caps.forAgent("t1", "bob", () => streamed(stream()));
  });

  it("off, counts nothing and leaves the stream as it is", async () => {
    const caps = new OpenStreams(null, () => undefined);
    const body = stream();
    for (let i = 0; i < 3; i++) expect((await caps.forKey(from("1"), publishable("k"), () => streamed(body))).body).toBe(body);
    expect(caps.openFor("k")).toBe(0);
  });
});
