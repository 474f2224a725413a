/**
 * The curl session of docs/streaming.md, run as written against two `channelkit serve`
 * processes on one SQLite file: its shell blocks in order, after the two that start the
 * servers (started here instead). Only what names the machine changes: the servers' URLs
 * and the database; a marker line between blocks tells their output apart.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, ROOT, startServe } from "./test-process.js";

const run = promisify(execFile);
const MARKER = "@@ block @@";
/** What the `slow` flow says, one text delta per word. */
const WORDS = Array.from({ length: 50 }, (_, i) => (i === 49 ? `word${i + 1}` : `word${i + 1} `));

interface StreamEvent {
  type: string;
  id?: string;
  delta?: string;
  data?: { run_id: string; conversation_id: string };
}

/** The events of SSE text, and the text of its frames as sent. */
function frames(text: string): { raw: string[]; events: StreamEvent[] } {
  const raw = text
    .split("\n\n")
    .filter((frame) => frame.startsWith("data: "))
    .map((frame) => `${frame}\n\n`);
  return { raw, events: raw.map((frame) => JSON.parse(frame.slice("data: ".length)) as StreamEvent) };
}

describe("docs/streaming.md", () => {
  let dir = "";
  const db = join(tmpdir(), `channelkit-docs-streaming-${randomUUID()}.db`);
  afterAll(async () => {
    await killAll();
    await Promise.all(
      [dir, ...["", "-wal", "-shm"].map((suffix) => `${db}${suffix}`)].filter(Boolean).map((file) => rm(file, { recursive: true, force: true })),
    );
  });

  it("its curl session works on two servers sharing one SQLite file: a stream cut on one is read whole on the other, then 204, then a cancel from the other", async () => {
    await ensureBuilt();
    dir = await mkdtemp(join(tmpdir(), "channelkit-docs-streaming-"));
    const doc = await readFile(join(ROOT, "docs/streaming.md"), "utf8");
    const session = doc.slice(doc.indexOf("## Try it"), doc.indexOf("## The routes"));
    const blocks = [...session.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1] as string);
    expect(blocks[0]).toContain("npx channelkit serve --port 3000");
    expect(blocks[1]).toContain("npx channelkit serve --port 3001");
    // The two servers, as the first two terminals start them (the second once the first migrated the file).
    const a = await startServe(["--db", db, "--port", "0"]);
    const b = await startServe(["--db", db, "--port", "0"]);
    const script = blocks.slice(2).join(`echo '${MARKER}'\n`).replaceAll("http://127.0.0.1:3000", a.url).replaceAll("http://127.0.0.1:3001", b.url);
    // `npx channelkit` of the repository, on this test's database.
    const shell = `set -e\nnpx() { shift; node ${join(ROOT, "packages/cli/dist/bin.js")} "$@" --db ${db} 2>/dev/null; }\n${script}`;
    const { stdout } = await run("bash", ["-c", shell], { cwd: dir, timeout: 60_000 });
    const [setup, first, resumed, after, cancel] = stdout.split(`${MARKER}\n`);
    expect(setup).toBe("");

    // 1. The stream cut after a second: data-run, then the first words (ten or so), no end.
    const cut = frames(first as string);
    const dataRun = cut.events[0];
    expect(dataRun?.type).toBe("data-run");
    const said = cut.events.filter((event) => event.type === "text-delta").map((event) => event.delta);
    expect(said.length).toBeLessThan(50);
    expect(said).toEqual(WORDS.slice(0, said.length));
    expect(cut.events.some((event) => event.type === "finish")).toBe(false);
    const conversation = dataRun?.data?.conversation_id as string;
    expect(conversation).toMatch(/^[0-9a-f-]{36}$/);

    // 2. The other server: the same bytes first, then every word once and in order, to finish.
    const whole = frames(resumed as string);
    expect(whole.raw.slice(0, cut.raw.length)).toEqual(cut.raw);
    expect(whole.events[0]).toEqual(dataRun);
    expect(whole.events.map((event) => event.type)).toEqual(["data-run", "text-start", ...WORDS.map(() => "text-delta"), "text-end", "finish"]);
    expect(whole.events.filter((event) => event.type === "text-delta").map((event) => event.delta)).toEqual(WORDS);

    // 3. Nothing in flight.
    expect(after).toBe("HTTP/1.1 204 No Content\r\n");

    // 4. The cancel from the second server, the first client's stream ended, the partial reply stored.
    const [answer, ...rest] = (cancel as string).split("\n");
    const stopped = JSON.parse(answer as string) as { run_id: string; conversation_id: string; status: string };
    expect(stopped).toEqual({ run_id: expect.stringMatching(/^[0-9a-f-]{36}$/), conversation_id: conversation, status: "cancelled" });
    expect(rest[0]).toBe('data: {"type":"finish","finishReason":"stop","messageMetadata":{"status":"cancelled","livechat_mode":null}}');
    const second = frames(await readFile(join(dir, "second.txt"), "utf8"));
    expect(second.events[0]?.data).toEqual({ run_id: stopped.run_id, conversation_id: conversation });
    expect(second.events.at(-1)?.type).toBe("finish");
    const partial = second.events
      .filter((event) => event.type === "text-delta")
      .map((event) => event.delta)
      .join("");
    expect(partial.length).toBeGreaterThan(0);
    expect(rest.slice(2).join("\n").trim()).toBe(partial.trimEnd());
    expect(partial.split(" ").filter(Boolean).length).toBeLessThan(50);
  }, 90_000);
});
