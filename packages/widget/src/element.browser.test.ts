import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { type ChannelService, type CreateChannelInput, createChannelService, memoryStorage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type RunningServer, serve } from "@channelkit/node";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { widgetAsset } from "./plugin.js";

/*
 * The loader in a real Chromium, against a real service on 127.0.0.1 serving both the page
 * (one script tag) and the widget's routes: a reply streams in, the conversation survives a
 * reload, errors read as sentences, the keyboard does everything, and axe-core finds no
 * serious or critical violation in any state.
 */

const CHROMIUM = process.env.CHANNELKIT_TEST_CHROMIUM || "/usr/bin/chromium";
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/**
 * The site embedding the widget, on another origin than the service (so the browser sends
 * real CORS requests with an Origin): `/?key=…` is a page with the one tag a site owner pastes.
 */
async function startSite(serviceUrl: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const params = new URL(request.url ?? "/", "http://site").searchParams;
    const key = (params.get("key") ?? "").replace(/[^\w]/g, "");
    const locale = params.get("locale") ? ` data-locale="${(params.get("locale") ?? "").replace(/[^\w]/g, "")}"` : "";
    response.writeHead(request.url?.startsWith("/?") ? 200 : 404, { "content-type": "text/html; charset=utf-8" });
    response.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head>
<body><main><h1>Shop</h1><p>A page with the chat widget.</p></main>
<script src="${serviceUrl}/public/widget/widget.js" data-key="${key}"${locale} defer></script></body></html>`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function describeWithChromium(name: string, body: () => void): void {
  if (existsSync(CHROMIUM)) {
    describe(name, body);
    return;
  }
  const reason = `${name}: skipped, no Chromium at ${CHROMIUM} (set CHANNELKIT_TEST_CHROMIUM)`;
  if (process.env.CI === "true") {
    describe(name, () => {
      it("needs Chromium, which CI must provide", () => {
        throw new Error(reason);
      });
    });
    return;
  }
  // Outside CI, a machine without Chromium runs everything else; the reason is printed.
  console.warn(reason);
  describe.skipIf(true)(name, body);
}

/** The serious and critical axe-core violations on the page, as `rule: target` lines. */
async function seriousViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => "axe" in window))) await page.addScriptTag({ content: axeSource });
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(context: Document): Promise<{ violations: AxeViolation[] }> } }).axe;
    type AxeViolation = { id: string; impact: string | null; nodes: { target: unknown[]; failureSummary?: string }[] };
    const { violations } = await axe.run(document);
    return violations
      .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
      .flatMap((violation) => violation.nodes.map((node) => `${violation.id}: ${JSON.stringify(node.target)} ${node.failureSummary ?? ""}`));
  });
}

/**
 * Waits for the host element to match `state` (its attributes: `[ready]`, `:not([busy])`).
 * "attached", not Playwright's default "visible": the host has no box of its own (the
 * launcher and panel are fixed-position inside its shadow root).
 */
function hostIs(page: Page, state: string, timeout?: number): Promise<void> {
  return page.locator(`channelkit-chat${state}`).waitFor({ state: "attached", timeout });
}

/** The `data-testid` of the element focused inside the widget's shadow root. */
function focused(page: Page): Promise<string | null> {
  return page.evaluate(() => {
    const host = document.activeElement;
    return host?.shadowRoot?.activeElement?.getAttribute("data-testid") ?? null;
  });
}

describeWithChromium("<channelkit-chat> in Chromium", () => {
  let browser: Browser;
  let service: ChannelService;
  let server: RunningServer;
  let site: Awaited<ReturnType<typeof startSite>>;
  let tenantId: string;

  async function channel(input: Omit<CreateChannelInput, "tenantId" | "mode">): Promise<string> {
    const created = await service.admin.createChannel({ tenantId, mode: "public", allowedOrigins: [site.url], ...input });
    return created.api_key;
  }

  async function open(key: string, query = ""): Promise<Page> {
    const page = await browser.newPage();
    await page.goto(`${site.url}/?key=${key}${query}`);
    return page;
  }

  beforeAll(async () => {
    service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, plugins: [widgetAsset()], secretKey: "ab".repeat(32) });
    server = await serve(service, { port: 0 });
    site = await startSite(server.url);
    tenantId = (await service.admin.createTenant({ name: "Shop" })).tenant.id;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await site?.close();
    await server?.close();
    await service?.close();
  });

  it("opens from the keyboard, streams a reply, announces it, closes with Escape; no serious axe violation", async () => {
    const key = await channel({ flow: "echo", widget: { strings: { en_US: { suggestions: ["Where is my order?"] } } } });
    const page = await open(key);
    const host = page.locator("channelkit-chat");
    await hostIs(page, "[ready]");
    expect(await seriousViolations(page)).toEqual([]);

    await page.keyboard.press("Tab");
    expect(await focused(page)).toBe("launcher");
    await expect.poll(() => page.getByTestId("launcher").getAttribute("aria-label")).toBe("Open the chat");
    await page.keyboard.press("Enter");
    await page.getByTestId("panel").waitFor();
    expect(await focused(page)).toBe("input");
    expect(await page.getByTestId("message").first().textContent()).toBe("Hello! How can I help you?");
    expect(await page.getByTestId("suggestion").allTextContents()).toEqual(["Where is my order?"]);
    expect(await seriousViolations(page)).toEqual([]);

    await page.keyboard.type("Hello there");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator('[data-role="assistant"]:not([data-greeting])').allTextContents()).toEqual(["Echo: Hello there"]);
    await hostIs(page, ":not([busy])");
    expect(await page.locator('[data-role="user"]').allTextContents()).toEqual(["Hello there"]);
    expect(await page.getByTestId("suggestion").isVisible()).toBe(false);
    await expect.poll(() => page.getByTestId("announcer").textContent()).toBe("Echo: Hello there");
    expect(await focused(page)).toBe("input");
    expect(await seriousViolations(page)).toEqual([]);

    await page.emulateMedia({ colorScheme: "dark" });
    expect(await seriousViolations(page)).toEqual([]);

    await page.keyboard.press("Escape");
    expect(await page.getByTestId("panel").isVisible()).toBe(false);
    expect(await focused(page)).toBe("launcher");
    expect(await host.getAttribute("open")).toBeNull();
    await page.close();
  });

  it("shows the reply token by token, with sending disabled while it streams", async () => {
    const key = await channel({ flow: "slow" });
    const page = await open(key);
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("Go");
    await page.getByTestId("send").click();
    const reply = page.locator('[data-role="assistant"]:not([data-greeting])');
    await expect.poll(() => reply.textContent(), { timeout: 5000 }).toMatch(/^word1 word2/);
    expect(await page.locator("channelkit-chat").getAttribute("busy")).toBe("");
    expect(await page.getByTestId("send").isDisabled()).toBe(true);
    const partial = (await reply.textContent()) ?? "";
    expect(partial).not.toContain("word50");
    await hostIs(page, ":not([busy])", 15_000);
    expect(await reply.textContent()).toMatch(/word49 word50$/);
    expect(await page.getByTestId("send").isDisabled()).toBe(false);
    await page.close();
  });

  it("restores the conversation after a reload and continues it; a conversation the service lost is forgotten", async () => {
    const key = await channel({ flow: "echo" });
    const page = await open(key);
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("First");
    await page.keyboard.press("Enter");
    await hostIs(page, "[ready]:not([busy])");
    await expect.poll(() => page.locator('[data-role="assistant"]:not([data-greeting])').count()).toBe(1);
    const conversationId = await page.evaluate(() => (document.querySelector("channelkit-chat") as unknown as { conversationId: string }).conversationId);
    expect(conversationId).toMatch(/^[0-9a-f-]{36}$/);

    await page.reload();
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    expect(await page.locator('[data-testid="message"]:not([data-greeting])').allTextContents()).toEqual(["First", "Echo: First"]);
    await page.getByTestId("input").fill("Second");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.locator('[data-role="assistant"]:not([data-greeting])').allTextContents()).toEqual(["Echo: First", "Echo: Second"]);
    const history = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { authorization: `Bearer ${key}` } });
    expect(((await history.json()) as { messages: unknown[] }).messages).toHaveLength(4);

    // Another conversation id stored, which the service does not know: forgotten, and a new conversation starts.
    await page.evaluate(() => {
      for (const name of Object.keys(localStorage)) localStorage.setItem(name, "7d0c5d8e-1d7f-4d6e-9a57-3c1f8e2b4a60");
    });
    await page.reload();
    await hostIs(page, "[ready]");
    expect(await page.evaluate(() => Object.values(localStorage))).toEqual([]);
    expect(await page.locator('[data-testid="message"]:not([data-greeting])').count()).toBe(0);
    await page.close();
  });

  it("reads an error while loading the configuration, in English, without a click (origin not allowed)", async () => {
    const created = await service.admin.createChannel({ tenantId, flow: "echo", mode: "public", allowedOrigins: ["https://elsewhere.example"] });
    const page = await open(created.api_key);
    await hostIs(page, '[error="origin_not_allowed"]');
    expect(await page.getByTestId("error").textContent()).toBe("This chat is not enabled on this website.");
    expect(await page.getByTestId("error").isVisible()).toBe(true);
    expect(await page.getByTestId("retry").isVisible()).toBe(false);
    expect(await page.getByTestId("input").isVisible()).toBe(false);
    expect(await page.getByTestId("panel").getAttribute("role")).toBe("dialog");
    expect(await seriousViolations(page)).toEqual([]);
    await page.close();
  });

  it("speaks the language of data-locale, with the channel's theme", async () => {
    const key = await channel({ flow: "echo", languages: ["en_US", "fr_FR"], widget: { theme: { position: "bottom-left", primary_color: "#fde047" } } });
    const page = await open(key, "&locale=fr_FR");
    await hostIs(page, "[ready]");
    expect(await page.getByTestId("launcher").getAttribute("aria-label")).toBe("Ouvrir la discussion");
    await page.getByTestId("launcher").click();
    expect(await page.getByTestId("title").textContent()).toBe("Discutons");
    expect(await page.getByTestId("send").textContent()).toBe("Envoyer");
    const launcher = await page.getByTestId("launcher").boundingBox();
    expect(launcher?.x).toBeLessThan(100);
    // A light primary colour gets black text, for contrast.
    expect(await page.getByTestId("send").evaluate((element) => getComputedStyle(element).color)).toBe("rgb(0, 0, 0)");
    expect(await seriousViolations(page)).toEqual([]);
    await page.close();
  });

  it("reads each channel state and key problem as its sentence", async () => {
    const inactive = await service.admin.createChannel({ tenantId, flow: "echo", mode: "public" });
    await service.admin.updateChannel(inactive.channel.id, { state: "inactive" });
    const archived = await service.admin.createChannel({ tenantId, flow: "echo", mode: "public" });
    await service.admin.updateChannel(archived.channel.id, { state: "archived" });
    const cases = [
      [inactive.api_key, "channel_inactive", "This chat is paused for now. Please come back later."],
      [archived.api_key, "channel_archived", "This chat is no longer available."],
      [`svc_pub_${"Zz9".repeat(15)}`, "invalid_api_key", "This chat is not set up correctly."],
      ["", "missing_api_key", "This chat is not set up correctly."],
    ];
    for (const [key, code, message] of cases) {
      const page = await open(key as string);
      await hostIs(page, `[error="${code}"]`);
      expect(await page.getByTestId("error").textContent()).toBe(message);
      expect(await page.getByTestId("retry").isVisible()).toBe(false);
      await page.close();
    }
  });

  it("offers Retry when the network is lost, which resends once it is back", async () => {
    const key = await channel({ flow: "echo" });
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${site.url}/?key=${key}`);
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    await context.setOffline(true);
    await page.getByTestId("input").fill("Anyone?");
    await page.keyboard.press("Enter");
    await page.getByTestId("retry").waitFor();
    expect(await page.getByTestId("error").textContent()).toBe("The connection was lost. Check your network and try again.");
    expect(await page.locator("channelkit-chat").getAttribute("error")).toBe("network");
    await context.setOffline(false);
    await page.getByTestId("retry").click();
    await expect.poll(() => page.locator('[data-role="assistant"]:not([data-greeting])').allTextContents()).toEqual(["Echo: Anyone?"]);
    expect(await page.getByTestId("error").textContent()).toBe("");
    expect(await page.locator('[data-role="user"]').allTextContents()).toEqual(["Anyone?"]);
    await context.close();
  });

  it("offers Retry after a failed run, which sends the message again", async () => {
    const key = await channel({ flow: "fail" });
    const page = await open(key);
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("Try");
    await page.keyboard.press("Enter");
    await page.getByTestId("retry").waitFor();
    expect(await page.getByTestId("error").textContent()).toBe("Something went wrong. Please try again.");
    expect(await page.locator("channelkit-chat").getAttribute("error")).toBe("stream_error");
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByTestId("retry").click();
    await expect.poll(() => page.locator('[data-role="assistant"]:not([data-greeting])').count()).toBe(2);
    await page.getByTestId("retry").waitFor();
    expect(await page.locator('[data-role="user"]').allTextContents()).toEqual(["Try"]);
    await page.close();
  });

  it("sends a starter suggestion, and cancels a streaming reply when removed from the page", async () => {
    const key = await channel({ flow: "slow", widget: { strings: { en_US: { suggestions: ["Tell me more"] } } } });
    const page = await open(key);
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    await page.getByTestId("suggestion").click();
    expect(await page.locator('[data-role="user"]').allTextContents()).toEqual(["Tell me more"]);
    await expect.poll(() => page.locator('[data-role="assistant"]:not([data-greeting])').textContent()).toMatch(/^word1/);
    const aborted = await page.evaluate(async () => {
      const element = document.querySelector("channelkit-chat") as HTMLElement;
      element.remove();
      return !element.hasAttribute("busy");
    });
    expect(aborted).toBe(true);
    await page.close();
  });
});
