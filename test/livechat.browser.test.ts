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
  const leave = (page: Page) => page.getByTestId("livechat-leave");
  /** The bot's replies shown, the greeting aside. */
  const botReplies = (page: Page) => page.locator('[data-testid="message"][data-role="assistant"]:not([data-greeting])').allTextContents();
  const agentBubbles = (page: Page) => page.getByTestId("livechat-message").allTextContents();

  /** The demo page, open, after the user asked for a human: the conversation waits for an agent. */
  async function handedOver(): Promise<{ page: Page; id: string }> {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    await page.goto(`${server.url}/`);
    await page.locator("channelkit-chat[ready]").waitFor({ state: "attached" });
    await page.getByTestId("launcher").click();
    await send(page, "I want to talk to a human");
    await expect.poll(() => botReplies(page)).toEqual(["Connecting you to an agent"]);
    await expect.poll(() => status(page).textContent()).toBe("Connecting you to an agent…");
    expect(await leave(page).isVisible()).toBe(true);
    const id = await page.locator("channelkit-chat").evaluate((element) => (element as HTMLElement & { conversationId: string }).conversationId);
    return { page, id };
  }

  async function send(page: Page, text: string): Promise<void> {
    await page.getByTestId("input").fill(text);
    await page.keyboard.press("Enter");
    await page.locator("channelkit-chat:not([busy])").waitFor({ state: "attached" });
  }

  it("the agent's message and each change of mode appear in the open widget; after the close the bot answers again", async () => {
    const { page, id } = await handedOver();

    // The agent works through the inbox, over HTTP; the widget is not reloaded.
    const { conversations } = await agent("GET", "/conversations?mode=waiting");
    expect(conversations.map((conversation: { conversation_id: string }) => conversation.conversation_id)).toContain(id);
    await agent("POST", `/conversations/${id}/accept`);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("You are talking with an agent.");
    await agent("POST", `/conversations/${id}/messages`, { content: "Hello, I am Ann. How can I help?" });
    await expect.poll(() => agentBubbles(page), { timeout: 3000 }).toEqual(["AgentHello, I am Ann. How can I help?"]);
    await screenshot(page, "widget-livechat");

    // The user answers: it goes to Ann (the flow does not run, no reply), and Ann sees it.
    await send(page, "My parcel is late");
    const { messages } = await agent("GET", `/conversations/${id}`);
    expect(messages.at(-1)).toMatchObject({ content: "My parcel is late", sender: "user" });
    expect(await botReplies(page)).toEqual(["Connecting you to an agent"]);

    await agent("POST", `/conversations/${id}/close`);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("The agent closed the conversation.");
    expect(await leave(page).isVisible()).toBe(false);

    // The bot has the conversation again: the handover flow answers (and hands over anew).
    await send(page, "Again, please");
    await expect.poll(() => botReplies(page), { timeout: 3000 }).toEqual(["Connecting you to an agent", "Connecting you to an agent"]);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("Connecting you to an agent…");

    // A reload shows the agent's message again from history, and follows on from there: what
    // the agent writes next appears live, once.
    await page.reload();
    await page.locator("channelkit-chat[ready]").waitFor({ state: "attached" });
    await page.getByTestId("launcher").click();
    expect(await agentBubbles(page)).toEqual(["AgentHello, I am Ann. How can I help?"]);
    expect(await status(page).textContent()).toBe("Connecting you to an agent…");
    await agent("POST", `/conversations/${id}/accept`);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("You are talking with an agent.");
    await agent("POST", `/conversations/${id}/messages`, { content: "Ann again." });
    await expect.poll(() => agentBubbles(page), { timeout: 3000 }).toEqual(["AgentHello, I am Ann. How can I help?", "AgentAnn again."]);
    await agent("POST", `/conversations/${id}/close`);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("The agent closed the conversation.");
    await page.close();
  });

  it("the user leaves the queue, and later an active live chat, with the leave button", async () => {
    const { page, id } = await handedOver();
    await leave(page).click();
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("You left the queue.");
    expect(await leave(page).isVisible()).toBe(false);
    const waiting = await agent("GET", "/conversations?mode=waiting");
    expect(waiting.conversations.map((conversation: { conversation_id: string }) => conversation.conversation_id)).not.toContain(id);

    // The bot has it again; handed over anew, an agent accepts, and the user ends the live chat.
    await send(page, "A human after all");
    await expect.poll(() => botReplies(page), { timeout: 3000 }).toEqual(["Connecting you to an agent", "Connecting you to an agent"]);
    await agent("POST", `/conversations/${id}/accept`);
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("You are talking with an agent.");
    expect(await leave(page).isVisible()).toBe(true);
    await leave(page).click();
    await expect.poll(() => status(page).textContent(), { timeout: 3000 }).toBe("You left the queue.");
    expect((await agent("GET", `/conversations/${id}`)).conversation.mode).toBe("livechat_cancelled");
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
