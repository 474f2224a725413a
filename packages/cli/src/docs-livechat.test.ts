/**
 * The curl session of docs/livechat.md, run as written against `channelkit serve --demo`
 * (what `npm start` runs): its shell blocks in order, the terminal that follows the
 * conversation in the background. Only what names the machine changes: the server's URL,
 * the database and the admin secret.
 */
import { execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, ROOT, startServe } from "./test-process.js";

const run = promisify(execFile);

describe("docs/livechat.md", () => {
  const db = join(tmpdir(), `channelkit-docs-livechat-${randomUUID()}.db`);
  const events = join(tmpdir(), `channelkit-docs-livechat-${randomUUID()}.events`);
  afterAll(async () => {
    await killAll();
    await Promise.all([events, ...["", "-wal", "-shm", ".demo-widget.json"].map((suffix) => `${db}${suffix}`)].map((file) => rm(file, { force: true })));
  });

  it("its curl session works against the demo server: handover, accept, answer, the user reads it, close, the bot resumes", async () => {
    await ensureBuilt();
    const secret = randomBytes(32).toString("hex");
    const server = await startServe(["--demo", "--db", db, "--port", "0"], { CHANNELKIT_ADMIN_JWT_SECRET: secret });
    const doc = await readFile(join(ROOT, "docs/livechat.md"), "utf8");
    const session = doc.slice(doc.indexOf("## Try it"), doc.indexOf("## The modes"));
    const blocks = [...session.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1] as string);
    expect(blocks[0]).toContain("npm start");
    const script = blocks
      .slice(1)
      .map((block) => (block.includes("curl -N") ? `${block.trim()} > ${events} 2>/dev/null &\nFOLLOW=$!\nsleep 0.5` : block))
      .join("\n")
      .replaceAll("<the same secret>", secret)
      .replaceAll("http://127.0.0.1:3000", server.url);
    // `npx channelkit` of the repository, on this test's database.
    const shell = `set -e\nnpx() { shift; node ${join(ROOT, "packages/cli/dist/bin.js")} "$@" --db ${db} 2>/dev/null; }\n${script}\nsleep 0.5\nkill $FOLLOW\necho "END $CONV"`;
    const { stdout } = await run("bash", ["-c", shell], { cwd: tmpdir(), timeout: 30_000 });
    expect(stdout).toMatch(/END [0-9a-f-]{36}/);
    expect(stdout).toContain('"livechat_mode":"livechat_waiting"');
    expect(stdout).toContain('"livechat_mode":"livechat_active"');
    expect(stdout).toContain('"content":"Hi, I am Ann. How can I help?"');
    expect(stdout).toContain('"mode":"livechat_closed"');
    expect(stdout).toContain('"content":"Echo: Thanks!"');
    const followed = (await readFile(events, "utf8"))
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)));
    expect(followed.map((event) => (event.type === "mode" ? event.mode : `${event.message.sender}: ${event.message.content}`))).toEqual([
      "livechat_waiting",
      "livechat_active",
      "agent: Hi, I am Ann. How can I help?",
      "user: My parcel is late",
      "livechat_closed",
      "bot",
    ]);
  });
});
