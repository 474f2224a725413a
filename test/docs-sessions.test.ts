/**
 * Every shell session of the documentation marked runnable, run as written against the
 * servers it starts (`npm start`'s demo when it starts none), its shown output checked: see
 * test/doc-sessions.ts for how, docs/contributing.md for the conventions. Some pages get
 * checks of their own on top (what a stream cut and resumed carries, what the live-chat
 * subscription saw), where the page shows an output that depends on timing.
 */
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt } from "../packages/cli/src/test-process.js";
import { consoleCommands, containsShown, matchesShown, type PageSession, pageSession, runSession, type SessionResult, shellCommands } from "./doc-sessions.js";
import { type DocBlock, docBlocks, docFiles, parseBlocks } from "./docs.js";

const block = (code: string, lang = "sh", flags = ["runnable"]): DocBlock => ({ file: "page.md", line: 10, lang, flags, code });

describe("the docs' session conventions", () => {
  it("an output as shown: … for anything, an id cut by … for any id, any timestamp, whitespace optional", () => {
    const actual =
      '{"run_id":"93643b01-5d0e-4c47-9d2a-0b4b8f0e2a11","status":"pending","created_at":"2026-11-25T13:33:30.522Z","key":"svc_live_Oy0oxyeE7A6rvPmwA3Bz6lfzasqM1tnt3xyBzDlU7gU","output":{"a":1}}';
    expect(matchesShown('{"run_id":"93643b01-…","status":"pending",…}', actual)).toBe(true);
    expect(matchesShown('{"run_id":"…", "status":"pending",\n  "created_at":"2026-01-01T00:00:00.000Z","key":"svc_live_…","output":{"a":1}}', actual)).toBe(
      true,
    );
    expect(matchesShown('{"run_id":"…","status":"success",…}', actual)).toBe(false);
    expect(matchesShown('{"run_id":"…","status":"pending"}', actual)).toBe(false);
    expect(matchesShown('{"key":"svc_pub_…",…}', '{"key":"svc_live_abc"}')).toBe(false);
    // An id cut by … is one id, "…" one string: neither spans fields.
    expect(matchesShown('{"id":"9ac9ec54-…","mode":"a"}', '{"id":"9ac9ec54-1","x":1,"mode":"a"}')).toBe(false);
    expect(matchesShown('{"id":"…","mode":"a"}', '{"id":"9ac9ec54-1","x":"1","mode":"a"}')).toBe(false);
    expect(matchesShown('{"id":"…",…,"mode":"a"}', '{"id":"9ac9ec54-1","x":"1","mode":"a"}')).toBe(true);
    expect(matchesShown("HTTP/1.1 204 No Content", "HTTP/1.1 204 No Content\r\n")).toBe(true);
  });

  it("a comment under a command that begins like an output shows it, indented lines go on with it, any other comment is prose", () => {
    const commands = shellCommands(
      block(
        [
          "TENANT=$(npx channelkit tenant create --name Acme | json .tenant.id)",
          "curl -s http://127.0.0.1:3000/x \\",
          '  -d \'{"a":',
          "1}'",
          '# {"a":1,',
          '#   "b":2}',
          "# (prose after the output)",
          '# {"not":"output"}',
          "",
          "echo done   # a comment of its line",
          "# and prose",
        ].join("\n"),
      ),
    );
    expect(commands).toEqual([
      { text: "TENANT=$(npx channelkit tenant create --name Acme | json .tenant.id)", line: 11, shown: null },
      { text: "curl -s http://127.0.0.1:3000/x \\\n  -d '{\"a\":\n1}'", line: 12, shown: '{"a":1,\n  "b":2}' },
      { text: "echo done   # a comment of its line", line: 20, shown: null },
    ]);
    expect(consoleCommands(block('$ npx channelkit channel show 00\n{"error":{}}\n$ echo a \\\n> b\na b\n', "console"))).toEqual([
      { text: "npx channelkit channel show 00", line: 11, shown: '{"error":{}}' },
      { text: "echo a \\\nb", line: 13, shown: "a b" },
    ]);
  });

  it("a page's session: its runnable blocks, the output block after one, the config it writes; mistakes in fences refused", () => {
    const page = [
      "```ts",
      "// channelkit.config.ts",
      "export default {};",
      "```",
      "```sh runnable",
      "echo hi",
      "```",
      "```text output",
      "hi",
      "```",
      "```sh",
      "not run",
      "```",
      "```json output",
      "{}",
      "```",
      "```sh runable",
      "```",
    ].join("\n");
    const session = pageSession("page.md", parseBlocks("page.md", page)) as PageSession;
    expect(session.files).toEqual({ "channelkit.config.ts": "// channelkit.config.ts\nexport default {};\n" });
    expect(session.steps.map((step) => [step.block.line, step.output?.line])).toEqual([[5, 8]]);
    expect(session.errors).toEqual([
      "page.md:14: an output block follows no runnable block",
      "page.md:17: unknown fence word runable (a shell block takes runnable, background)",
    ]);
  });
});

/** The pages with a session, and the checks some of them get on top of their shown outputs. */
const sessions = docFiles()
  .map((file) => pageSession(file, docBlocks(file)))
  .filter((session): session is PageSession => session !== null);

/** What the commands of the runnable block whose text includes `marker` printed, together. */
function printedBy(result: SessionResult, marker: string): string {
  const step = result.steps.find(({ step }) => step.block.code.includes(marker));
  if (!step) throw new Error(`no runnable block has ${marker}`);
  return step.results.map((done) => `${done.stdout}${done.stderr}`).join("");
}

/** The text blocks of a page that show what a command printed, but are not its `output` (a second terminal's, or timing's). */
function shownBlocks(page: string): DocBlock[] {
  return docBlocks(page).filter((block) => block.lang === "text" && !block.flags.includes("output"));
}

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

/** What the `slow` flow says, one text delta per word. */
const WORDS = Array.from({ length: 50 }, (_, i) => (i === 49 ? `word${i + 1}` : `word${i + 1} `));

/** Checks of a page's own, on top of its shown outputs. */
const extraChecks: Record<string, (result: SessionResult) => Promise<void>> = {
  /** The user's subscription (the third terminal) saw every change, in order, as the page's text blocks show them. */
  "docs/livechat.md": async (result) => {
    const followed = result.background[0] as string;
    for (const shown of shownBlocks("docs/livechat.md")) expect(containsShown(shown.code, followed), `${shown.file}:${shown.line}\n${followed}`).toBe(true);
    const events = followed
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)));
    expect(events.map((event) => (event.type === "mode" ? event.mode : `${event.message.sender}: ${event.message.content}`))).toEqual([
      "livechat_waiting",
      "livechat_active",
      "agent: Hi, I am Ann. How can I help?",
      "user: My parcel is late",
      "livechat_closed",
      "bot",
    ]);
  },
  /**
   * Two servers on one SQLite file: the stream cut on the first is read whole on the second,
   * the same bytes first; then 204; then a cancel from the second ends the first client's
   * stream, the partial reply stored. The page's cut stream and cancelled reply show a number
   * of words that depends on timing: checked here as far as they are certain.
   */
  "docs/streaming.md": async (result) => {
    expect(result.servers).toHaveLength(2);
    const [cutShown, cancelShown] = shownBlocks("docs/streaming.md");
    // 1. The stream cut after a second: data-run, then the first words (ten or so), no end.
    const cutText = printedBy(result, '"payload":"Tell me a story"');
    const cut = frames(cutText);
    const dataRun = cut.events[0];
    expect(dataRun?.type).toBe("data-run");
    const said = cut.events.filter((event) => event.type === "text-delta").map((event) => event.delta);
    expect(said.length).toBeGreaterThan(0);
    expect(said.length).toBeLessThan(50);
    expect(said).toEqual(WORDS.slice(0, said.length));
    expect(cut.events.some((event) => event.type === "finish")).toBe(false);
    expect(containsShown((cutShown as DocBlock).code.slice(0, (cutShown as DocBlock).code.indexOf("…\n")), cutText)).toBe(true);
    const conversation = dataRun?.data?.conversation_id as string;
    expect(conversation).toMatch(/^[0-9a-f-]{36}$/);

    // 2. The other server: the same bytes first, then every word once and in order, to finish.
    const whole = frames(printedBy(result, "/stream -H"));
    expect(whole.raw.slice(0, cut.raw.length)).toEqual(cut.raw);
    expect(whole.events[0]).toEqual(dataRun);
    expect(whole.events.map((event) => event.type)).toEqual(["data-run", "text-start", ...WORDS.map(() => "text-delta"), "text-end", "finish"]);
    expect(whole.events.filter((event) => event.type === "text-delta").map((event) => event.delta)).toEqual(WORDS);

    // 4. The cancel from the second server, the first client's stream ended, the partial reply stored.
    const cancelText = printedBy(result, '"payload\\":\\"And another one');
    const [answer, finish, , partial] = cancelText.split("\n");
    expect(JSON.parse(answer as string)).toEqual({ run_id: expect.stringMatching(/^[0-9a-f-]{36}$/), conversation_id: conversation, status: "cancelled" });
    const shownLines = (cancelShown as DocBlock).code.split("\n");
    expect(matchesShown(shownLines[0] as string, answer as string)).toBe(true);
    expect(finish).toBe(shownLines[1]);
    const second = frames(await readFile(join(result.dir, "second.txt"), "utf8"));
    expect(second.events.at(-1)?.type).toBe("finish");
    const streamed = second.events
      .filter((event) => event.type === "text-delta")
      .map((event) => event.delta)
      .join("");
    expect(streamed.length).toBeGreaterThan(0);
    const stored = (partial as string).trim().split(" ");
    expect(stored.join(" ")).toBe(streamed.trim());
    expect(stored).toEqual(WORDS.slice(0, stored.length).map((word) => word.trim()));
  },
};

describe("the documentation's shell sessions", () => {
  const dirs: string[] = [];
  beforeAll(async () => {
    await ensureBuilt();
  }, 180_000);
  afterAll(async () => {
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it("are there", () => {
    expect(sessions.length).toBeGreaterThan(0);
  });

  it("a session that drifts from its page fails, named by the page's line", async () => {
    const page = [
      "```sh runnable",
      "curl -s http://127.0.0.1:3000/public/v1/api/execute -H 'Authorization: Bearer svc_live_…' -H 'Content-Type: application/json' -d '{\"payload\":\"hi\"}'",
      '# {"run_id":"…","conversation_id":"…","status":"pending",…}',
      "npx channelkit channel show 00000000-0000-4000-8000-000000000000",
      "curl -s http://127.0.0.1:3000/public/v1/api/conversations/<conversation id>/messages -H 'Authorization: Bearer <api key>'",
      "```",
      "```json output",
      '{"status":"success"}',
      "```",
      "```sh runnable",
      "npx channelkit tenant show <tenant id>",
      "```",
    ].join("\n");
    const result = await runSession(pageSession("drift.md", parseBlocks("drift.md", page)) as PageSession);
    dirs.push(result.dir);
    expect(result.failures).toEqual([
      expect.stringMatching(
        /^drift\.md:2: printed\n\{"run_id":"[0-9a-f-]{36}","conversation_id":"[0-9a-f-]{36}","status":"success",.*\nwhere the page shows\n/,
      ),
      expect.stringMatching(/^drift\.md:4: exited with 1: npx channelkit channel show .*\n\{"error":\{"code":"channel_not_found"/),
      expect.stringMatching(/^drift\.md:7: the block above printed\n/),
      "drift.md:11: nothing the session printed before stands for <tenant id>",
    ]);
  }, 60_000);

  it.each(sessions.map((session) => [session.page, session] as const))(
    "%s runs as written",
    async (_page, session) => {
      const result = await runSession(session);
      dirs.push(result.dir);
      const commands = result.steps.reduce((sum, step) => sum + step.results.length, 0);
      console.log(`${session.page}: ${session.steps.length} runnable blocks, ${commands} commands, ${result.servers.length} servers`);
      expect(result.failures, result.failures.join("\n\n")).toEqual([]);
      await extraChecks[session.page]?.(result);
    },
    120_000,
  );
});
