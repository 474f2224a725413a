/**
 * Live chat in the open widget, in real Chromium: `channelkit serve --demo` (the agent inbox
 * mounted), its demo page bound to the `handover` flow. The user asks for a human; an agent
 * accepts and answers through the inbox's HTTP routes; the agent's message and each change
 * of mode appear in the widget without a reload; the user leaves the queue with a click.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "../packages/cli/src/test-process.js";
import { browserMissing, launchChromium, ROOT, screenshot, staticSite } from "./browser.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex"), CHANNELKIT_ADMIN_JWT_SECRET: randomBytes(32).toString("hex") };
const missing = browserMissing();
if (missing) console.warn(`live-chat browser tests skipped: ${missing}`);

describe.skipIf(missing !== null)("live chat in the widget, in Chromium", () => {
  const db = join(tmpdir(), `channelkit-livechat-widget-${randomUUID()}.db`);
  let server: ServeProcess;
  let browser: Browser;
  let tenantId: string;
  let token: string;

  beforeAll(async () => {
    await ensureBuilt();
    [server, browser] = await Promise.all([startServe(["--demo", "--db", db, "--port", "0"], ENV), launchChromium()]);
    const output = server.lines.join("\n");
    tenantId = /admin-token --tenant (\S+)\)/.exec(output)?.[1] as string;
    const widgetChannel = /channel update (\S+) --allowed-origin/.exec(output)?.[1] as string;
    expect(tenantId, output).toBeTruthy();
    await runCliJson(["channel", "update", widgetChannel, "--flow", "handover", "--db", db], ENV);
    token = (await runCliJson<{ token: string }>(["admin-token", "--tenant", tenantId], ENV)).token;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await killAll();
    await Promise.all(["", "-wal", "-shm", ".demo-widget.json"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
  });

  /** An agent's call to the inbox, answered 200. */
  async function agent(method: "GET" | "POST", path: string, body?: unknown) {
    const response = await fetch(`${server.url}/api/v1/livechat${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "x-tenant-id": tenantId, ...(body ? { "content-type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    expect(response.status, await response.clone().text()).toBe(200);
    return response.json() as Promise<any>;
  }

  const status = (page: Page) => page.getByTestId("livechat-status");

  it("the agent's message and each change of mode appear in the open widget; the user leaves the queue with a click", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    await page.goto(`${server.url}/`);
    await page.locator("channelkit-chat[ready]").waitFor({ state: "attached" });
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("I want to talk to a human");
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator('[data-testid="message"][data-role="assistant"]:not([data-greeting])').allTextContents())
      .toEqual(["Connecting you to an agent"]);
    await expect.poll(() => status(page).textContent()).toBe("Connecting you to an agent…");
    expect(await page.getByTestId("livechat-leave").isVisible()).toBe(true);

    // The agent works through the inbox, over HTTP; the widget is not reloaded.
    const { conversations } = await agent("GET", "/conversations");
    const id = conversations[0].conversation_id as string;
    await agent("POST", `/conversations/${id}/accept`);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("You are talking with an agent.");
    await agent("POST", `/conversations/${id}/messages`, { content: "Hello, I am Ann. How can I help?" });
    await expect.poll(() => page.getByTestId("livechat-message").allTextContents(), { timeout: 3000 }).toEqual(["AgentHello, I am Ann. How can I help?"]);
    await screenshot(page, "widget-livechat");

    // The user answers: it goes to Ann (the flow does not run), and Ann sees it.
    await page.getByTestId("input").fill("My parcel is late");
    await page.keyboard.press("Enter");
    await page.locator("channelkit-chat:not([busy])").waitFor({ state: "attached" });
    const { messages } = await agent("GET", `/conversations/${id}`);
    expect(messages.at(-1)).toMatchObject({
      content: "My parcel is late",
      sender: "user",
    });

    await agent("POST", `/conversations/${id}/close`);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("The agent closed the conversation.");
    expect(await page.getByTestId("livechat-leave").isVisible()).toBe(false);

    // The bot has the conversation again: the handover flow hands over anew, and the user leaves the queue.
    await page.getByTestId("input").fill("Again, please");
    await page.keyboard.press("Enter");
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("Connecting you to an agent…");
    await page.getByTestId("livechat-leave").click();
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("You left the queue.");

    // A reload shows the agent's message again, under its label, from history.
    await page.reload();
    await page.locator("channelkit-chat[ready]").waitFor({ state: "attached" });
    await page.getByTestId("launcher").click();
    expect(await page.getByTestId("livechat-message").allTextContents()).toEqual(["AgentHello, I am Ann. How can I help?"]);
    expect(await status(page).textContent()).toBe("You left the queue.");
    await page.close();
  });

  it("examples/livechat-console: an agent sees a handover arrive, accepts it, answers, and sees the user's reply live", async () => {
    const files: Record<string, [string, string]> = {
      "/": ["index.html", "text/html; charset=utf-8"],
      "/console.js": ["console.js", "text/javascript; charset=utf-8"],
      "/console.css": ["console.css", "text/css; charset=utf-8"],
    };
    const bodies = new Map<string, { type: string; body: Buffer }>();
    for (const [path, [file, type]] of Object.entries(files)) bodies.set(path, { type, body: await readFile(join(ROOT, "examples/livechat-console", file)) });
    const site = await staticSite((path) => bodies.get(path));
    const { api_key: key } = await runCliJson<{ api_key: string }>(["channel", "create", "--tenant", tenantId, "--flow", "handover", "--db", db], ENV);
    const execute = (payload: string, conversationId?: string) =>
      fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ payload, ...(conversationId ? { conversation_id: conversationId } : {}) }),
      }).then((response) => response.json() as Promise<{ conversation_id: string }>);
    try {
      const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
      await page.goto(site.url);
      await page.getByTestId("server").fill(server.url);
      await page.getByTestId("tenant").fill(tenantId);
      await page.getByTestId("token").fill(token);
      await page.getByTestId("connect").click();
      await expect.poll(() => page.getByTestId("state").textContent()).toBe("Connected, live.");

      // A user asks for a human: the console shows it without being told.
      const { conversation_id: id } = await execute("I want to talk to a human");
      const item = page.locator(`[data-testid="queue-item"][data-conversation="${id}"]`);
      await item.waitFor({ timeout: 3000 });
      await item.getByTestId("accept").click();
      await expect.poll(() => page.getByTestId("chat-mode").textContent()).toBe("active");
      await page.getByTestId("reply-input").fill("Hello, I am Ann.");
      await page.getByTestId("reply-send").click();
      await expect.poll(() => page.getByTestId("transcript-message").last().textContent()).toBe("agentHello, I am Ann.");
      await execute("My parcel is late", id);
      await expect.poll(() => page.getByTestId("transcript-message").last().textContent(), { timeout: 3000 }).toBe("userMy parcel is late");
      await screenshot(page, "livechat-console");
      await page.getByTestId("close-chat").click();
      await expect.poll(() => page.getByTestId("chat-mode").textContent()).toBe("closed");
      const history = await fetch(`${server.url}/public/v1/api/conversations/${id}/messages`, { headers: { authorization: `Bearer ${key}` } });
      const stored = (await history.json()) as { mode: string; messages: { content: string; sender: string | null }[] };
      expect(stored.mode).toBe("livechat_closed");
      expect(stored.messages.map((m) => [m.sender, m.content])).toContainEqual(["agent", "Hello, I am Ann."]);
      await page.close();
    } finally {
      await site.close();
    }
  });
});
