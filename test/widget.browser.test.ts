/**
 * The widget as a newcomer and a site owner meet it, in real Chromium: `channelkit serve
 * --demo` (the built command, as `npm start` runs it) serves a page at `/` whose widget
 * streams; the same widget on a site of another origin works once that origin is allowed,
 * and on a site it is not allowed on shows the origin error with no request succeeding.
 * Screenshots of each state go to test/output/ (docs/widget.md shows them).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "../packages/cli/src/test-process.js";
import { browserMissing, hostIs, launchChromium, reactExampleSite, screenshot, staticSite } from "./browser.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
const missing = browserMissing();
if (missing) console.warn(`widget browser tests skipped: ${missing}`);

const replies = (page: Page) => page.locator('[data-role="assistant"]:not([data-greeting])');

/** A site owner's page embedding the widget with the one tag, optionally served with extra headers. */
function embeddingSite(serviceUrl: string, key: string, title: string, headers?: Record<string, string>) {
  return staticSite((path) =>
    path === "/"
      ? {
          type: "text/html; charset=utf-8",
          ...(headers ? { headers } : {}),
          body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title></head><body><main><h1>${title}</h1></main>
<script src="${serviceUrl}/public/widget/widget.js" data-key="${key}" defer></script></body></html>`,
        }
      : undefined,
  );
}

describe.skipIf(missing !== null)("the widget in Chromium, served by channelkit serve --demo", () => {
  const db = join(tmpdir(), `channelkit-widget-${randomUUID()}.db`);
  let server: ServeProcess;
  let browser: Browser;
  let key: string;
  let channelId: string;

  beforeAll(async () => {
    await ensureBuilt();
    [server, browser] = await Promise.all([startServe(["--demo", "--db", db, "--port", "0"], ENV), launchChromium()]);
    const line = server.lines.find((entry) => entry.startsWith("Widget: open")) ?? "";
    key = /publishable key (svc_pub_\w+)/.exec(line)?.[1] as string;
    channelId = /channel update (\S+) --allowed-origin/.exec(server.lines.join("\n"))?.[1] as string;
    expect(key, server.lines.join("\n")).toMatch(/^svc_pub_/);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await killAll();
    await Promise.all(["", "-wal", "-shm", ".demo-widget.json"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
  });

  /** Binds the demo's widget channel to `flow`; answers its allowed origins. */
  async function bindFlow(flow: string): Promise<string[]> {
    const { channel } = await runCliJson<{ channel: { allowed_origins: string[] } }>(["channel", "update", channelId, "--flow", flow, "--db", db], ENV);
    return channel.allowed_origins;
  }

  /** What a site owner does: allows the site's origin on the channel (the list is replaced, so the demo's own stay). */
  async function allowSite(origin: string, flow = "echo"): Promise<void> {
    const origins = [...(await bindFlow(flow)), origin];
    await runCliJson(["channel", "update", channelId, "--db", db, ...origins.flatMap((entry) => ["--allowed-origin", entry])], ENV);
  }

  it("the demo page at / chats at once: the greeting, a streamed reply, the conversation kept across a reload", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    const consoleErrors: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(message.text());
    });
    await page.goto(`${server.url}/`);
    await hostIs(page, "[ready]");
    await screenshot(page, "widget-closed");
    // Not even the browser's own request for a favicon fails.
    expect(consoleErrors).toEqual([]);
    await page.getByTestId("launcher").click();
    await page.getByTestId("panel").waitFor();
    await screenshot(page, "widget-greeting");
    await page.getByTestId("input").fill("Hello from the demo page");
    await page.keyboard.press("Enter");
    await expect.poll(() => replies(page).allTextContents()).toEqual(["Echo: Hello from the demo page"]);
    await hostIs(page, ":not([busy])");
    await screenshot(page, "widget-reply");
    await page.reload();
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    expect(await page.locator('[data-testid="message"]:not([data-greeting])').allTextContents()).toEqual([
      "Hello from the demo page",
      "Echo: Hello from the demo page",
    ]);
    await page.emulateMedia({ colorScheme: "dark" });
    await screenshot(page, "widget-restored-dark");
    await page.close();
  });

  it("a site of its own: once its origin is allowed, the one tag streams a reply token by token", async () => {
    const site = await embeddingSite(server.url, key, "My shop");
    try {
      await allowSite(site.origin, "slow");
      const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
      await page.goto(site.url);
      await hostIs(page, "[ready]");
      await page.getByTestId("launcher").click();
      await page.getByTestId("input").fill("Stream please");
      await page.keyboard.press("Enter");
      await expect.poll(() => replies(page).textContent(), { timeout: 5000 }).toMatch(/^word1 word2/);
      const partial = (await replies(page).textContent()) ?? "";
      expect(partial).not.toContain("word50");
      expect(await page.locator("channelkit-chat").getAttribute("busy")).toBe("");
      await screenshot(page, "widget-streaming");
      await hostIs(page, ":not([busy])", 15_000);
      expect(await replies(page).textContent()).toMatch(/word49 word50$/);
      await page.close();
    } finally {
      await bindFlow("echo");
      await site.close();
    }
  });

  it("works on a page whose Content-Security-Policy allows only the service's origin (no inline style or script)", async () => {
    const site = await embeddingSite(server.url, key, "Strict CSP", {
      "content-security-policy": `default-src 'none'; script-src ${server.url}; connect-src ${server.url}`,
    });
    try {
      await allowSite(site.origin);
      const page = await browser.newPage();
      const violations: string[] = [];
      page.on("console", (message) => {
        if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
      });
      await page.goto(site.url);
      await hostIs(page, "[ready]");
      await page.getByTestId("launcher").click();
      // Styled: the launcher has the theme's colour, not an unstyled button's.
      expect(await page.getByTestId("launcher").evaluate((element) => getComputedStyle(element).borderRadius)).not.toBe("0px");
      await page.getByTestId("input").fill("Under CSP");
      await page.keyboard.press("Enter");
      await expect.poll(() => replies(page).allTextContents()).toEqual(["Echo: Under CSP"]);
      expect(violations).toEqual([]);
      await page.close();
    } finally {
      await site.close();
    }
  });

  it("the React example: the AI SDK's own useChat streams a reply from /public/widget/chat", async () => {
    const site = await reactExampleSite();
    try {
      await allowSite(site.origin, "slow");
      const page = await browser.newPage({ viewport: { width: 800, height: 600 } });
      await page.goto(`${site.url}?endpoint=${encodeURIComponent(server.url)}&key=${key}`);
      await page.getByTestId("input").fill("Hello, useChat");
      await page.getByTestId("send").click();
      const reply = page.locator('[data-testid="message"][data-role="assistant"]');
      await expect.poll(() => reply.textContent(), { timeout: 5000 }).toMatch(/^word1 word2/);
      expect(await page.getByTestId("status").textContent()).toBe("streaming");
      expect((await reply.textContent()) ?? "").not.toContain("word50");
      await screenshot(page, "usechat-streaming");
      await expect.poll(() => page.getByTestId("status").textContent(), { timeout: 15_000 }).toBe("ready");
      expect(await reply.textContent()).toMatch(/word49 word50$/);
      expect(await page.getByTestId("conversation").textContent()).toMatch(/^[0-9a-f-]{36}$/);
      expect(await page.locator('[data-testid="message"][data-role="user"]').textContent()).toBe("Hello, useChat");
      await page.close();
    } finally {
      await bindFlow("echo");
      await site.close();
    }
  });

  it("a site the channel does not allow: the origin error shows, and no request to the service succeeds but the script", async () => {
    const site = await embeddingSite(server.url, key, "Not allowed");
    try {
      const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
      const answered: { url: string; status: number }[] = [];
      page.on("response", (response) => {
        if (response.url().startsWith(server.url) && response.request().method() !== "OPTIONS")
          answered.push({ url: response.url(), status: response.status() });
      });
      await page.goto(site.url);
      await hostIs(page, '[error="origin_not_allowed"]');
      expect(await page.getByTestId("error").textContent()).toBe("This chat is not enabled on this website.");
      await screenshot(page, "widget-origin-error");
      const succeeded = answered.filter((entry) => entry.status < 400).map((entry) => new URL(entry.url).pathname);
      expect(succeeded).toEqual(["/public/widget/widget.js"]);
      expect(answered.some((entry) => entry.url.includes("/public/widget/config") && entry.status === 403)).toBe(true);
      await page.close();
    } finally {
      await site.close();
    }
  });
});
