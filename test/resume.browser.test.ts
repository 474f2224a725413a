/**
 * Resumable streams in real Chromium, against `channelkit serve` (the built command) and a
 * channel created with `--resumable-streams`, bound to a `gated` flow (three words, then it
 * waits for the test to open its gate, then 47 more): a reply outlives the page that asked
 * for it, and "mid-reply" is a state the test holds, not a race with the clock. The AI SDK's own `useChat` with
 * `resume: true` (examples/widget-react, built with Vite) and the one-tag widget each show
 * the whole reply after a reload mid-reply, streamed live again from
 * `GET /public/widget/chat/{id}/stream`; the example's Stop cancels the run through
 * `POST /public/widget/chat/{id}/cancel`; the widget also rides out a dropped connection (a
 * proxy between the page and the service cuts it), shows the loss only once its retries
 * failed, and then resumes the reply with Retry; on a channel without resumable streams, a
 * dropped connection still shows the loss at once, and Retry sends the message again.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, makeApp, runCliJson, type ServeProcess, startServe, type TestApp } from "../packages/cli/src/test-process.js";
import { browserMissing, hostIs, launchChromium, reactExampleSite, screenshot, staticSite } from "./browser.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
const missing = browserMissing();
if (missing) console.warn(`resumable-stream browser tests skipped: ${missing}`);

/** What the `gated` flow answers, whole. */
const WHOLE_REPLY = Array.from({ length: 50 }, (_, index) => `word${index + 1}`).join(" ");

/**
 * The service's config: the `gated` flow writes `word1 word2 word3 `, then asks the test's gate
 * (`GATE_URL`) and writes the rest once it answers; a cancelled run stops waiting.
 */
const CONFIG = `import { defineFlow, text } from "@channelkit/core";

const gated = defineFlow({
  name: "gated",
  async *run(ctx) {
    for (let i = 1; i <= 50; i++) {
      if (i === 4) await (await fetch(process.env.GATE_URL, { signal: ctx.signal })).text();
      yield text(i === 50 ? \`word\${i}\` : \`word\${i} \`);
    }
    return { words: 50 };
  },
});

export default { flows: [gated] };
`;

/**
 * Where the flow waits: closed, it holds every request until `open()`; open, it answers at
 * once. Each test starts closed.
 */
async function startGate() {
  let opened = false;
  const held = new Set<import("node:http").ServerResponse>();
  const server = createServer((_request, response) => {
    if (opened) return response.end("go");
    held.add(response);
    response.once("close", () => held.delete(response));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    open() {
      opened = true;
      for (const response of held) response.end("go");
    },
    shut() {
      opened = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * A reverse proxy on 127.0.0.1 in front of the service, streaming answers through as they
 * come: `drop()` cuts every connection the browser has open to it (a network switch, a
 * dropped Wi-Fi); while `down`, it cuts each new connection at once (offline). Records what it
 * forwarded, `METHOD path status`.
 */
async function startProxy(target: string) {
  const sockets = new Set<Socket>();
  const forwarded: string[] = [];
  let down = false;
  const server: Server = createServer((request, response) => {
    const upstream = httpRequest(`${target}${request.url}`, { method: request.method, headers: request.headers }, (answer) => {
      forwarded.push(`${request.method} ${request.url} ${answer.statusCode}`);
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    });
    upstream.on("error", () => response.destroy());
    // The browser gone, the service sees its client go too.
    response.on("close", () => upstream.destroy());
    request.pipe(upstream);
  });
  server.on("connection", (socket) => {
    if (down) return socket.destroy();
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const drop = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    forwarded,
    drop,
    setDown(value: boolean) {
      down = value;
      if (value) drop();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

describe.skipIf(missing !== null)("resumable streams in Chromium, served by channelkit serve", () => {
  const db = join(tmpdir(), `channelkit-resume-${randomUUID()}.db`);
  let server: ServeProcess;
  let browser: Browser;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let reactSite: Awaited<ReturnType<typeof reactExampleSite>>;
  let widgetSite: Awaited<ReturnType<typeof staticSite>>;
  let gate: Awaited<ReturnType<typeof startGate>>;
  let app: TestApp;
  let config: string[];
  let key: string;
  /** A channel without resumable streams: a lost connection cancels its run. */
  let plainKey: string;

  beforeAll(async () => {
    [reactSite, browser] = await Promise.all([
      reactExampleSite(),
      launchChromium(),
      (async () => {
        [gate, app] = await Promise.all([startGate(), makeApp({ "channelkit.config.mjs": CONFIG }), ensureBuilt()]);
        config = ["--config", join(app.path, "channelkit.config.mjs")];
        server = await startServe(["--db", db, "--port", "0", ...config], { ...ENV, GATE_URL: gate.url });
        proxy = await startProxy(server.url);
      })(),
    ]);
    // A site owner's page with the one tag: `/` loads the widget from the service, `/proxied`
    // through the proxy, `/plain` through the proxy with the key of the channel without resumable streams.
    widgetSite = await staticSite((path) => {
      const [base, pageKey] = path === "/" ? [server.url, key] : path === "/proxied" ? [proxy.url, key] : path === "/plain" ? [proxy.url, plainKey] : [];
      if (base === undefined) return undefined;
      return {
        type: "text/html; charset=utf-8",
        body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head><body><main><h1>Shop</h1></main>
<script src="${base}/public/widget/widget.js" data-key="${pageKey}" defer></script></body></html>`,
      };
    });
    const { tenant } = await runCliJson<{ tenant: { id: string } }>(["tenant", "create", "--name", "Resume", "--db", db, ...config], ENV);
    const created = await runCliJson<{ api_key: string; channel: { resumable_streams?: unknown } }>(
      [
        ...["channel", "create", "--tenant", tenant.id, "--flow", "gated", "--mode", "public", "--resumable-streams"],
        ...["--allowed-origin", reactSite.origin, "--allowed-origin", widgetSite.origin, "--db", db, ...config],
      ],
      ENV,
    );
    key = created.api_key;
    expect(created.channel.resumable_streams).toBe(true);
    const plain = await runCliJson<{ api_key: string }>(
      ["channel", "create", "--tenant", tenant.id, "--flow", "gated", "--mode", "public", "--allowed-origin", widgetSite.origin, "--db", db, ...config],
      ENV,
    );
    plainKey = plain.api_key;
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await Promise.all([reactSite?.close(), widgetSite?.close(), proxy?.close(), gate?.close()]);
    await killAll();
    await app?.remove();
    await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
  });

  beforeEach(() => gate.shut());

  /** The conversation's history as the service stored it: `role: content` lines. */
  async function stored(conversationId: string, apiKey = key): Promise<string[]> {
    const response = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(response.status).toBe(200);
    const { messages } = (await response.json()) as { messages: { role: string; content: string }[] };
    return messages.map((message) => `${message.role}: ${message.content}`);
  }

  /** The resume requests the page made, with their status and stream header. */
  function watchResumes(page: Page): { status: number; protocol: string | undefined }[] {
    const seen: { status: number; protocol: string | undefined }[] = [];
    page.on("response", (response) => {
      if (/\/public\/widget\/chat\/[^/]+\/stream$/.test(new URL(response.url()).pathname) && response.request().method() === "GET") {
        seen.push({ status: response.status(), protocol: response.headers()["x-vercel-ai-ui-message-stream"] });
      }
    });
    return seen;
  }

  it("useChat with resume: true (the React example): reloaded mid-reply, the page shows the reply streaming on to its end", async () => {
    const page = await browser.newPage({ viewport: { width: 800, height: 600 } });
    const resumes = watchResumes(page);
    await page.goto(`${reactSite.url}?endpoint=${encodeURIComponent(server.url)}&key=${key}`);
    const reply = page.locator('[data-testid="message"][data-role="assistant"]');
    const user = page.locator('[data-testid="message"][data-role="user"]');
    const status = page.getByTestId("status");
    // resume: true asks at once; nothing is streaming yet.
    await expect.poll(() => resumes.map((entry) => entry.status)).toEqual([204]);
    await page.getByTestId("input").fill("Tell me a long story");
    await page.getByTestId("send").click();
    await expect.poll(() => reply.textContent(), { timeout: 15_000 }).toMatch(/^word1 word2 word3/);
    const conversationId = (await page.getByTestId("conversation").textContent()) ?? "";
    expect(conversationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await reply.textContent()).not.toContain("word50");

    await page.reload();
    // The user's message from the history, the reply from the resumed stream, still arriving.
    await expect.poll(() => user.allTextContents()).toEqual(["Tell me a long story"]);
    await expect.poll(() => status.textContent(), { timeout: 15_000 }).toBe("streaming");
    expect(await reply.textContent()).toMatch(/^word1 word2 word3/);
    expect(await reply.textContent()).not.toContain("word50");
    await screenshot(page, "usechat-resumed");
    gate.open();
    await expect.poll(() => status.textContent(), { timeout: 15_000 }).toBe("ready");
    expect(await reply.allTextContents()).toEqual([WHOLE_REPLY]);
    expect(await page.getByTestId("conversation").textContent()).toBe(conversationId);
    expect(await page.getByTestId("error").count()).toBe(0);
    expect(resumes).toEqual([
      { status: 204, protocol: undefined },
      { status: 200, protocol: "v1" },
    ]);
    // The reload cancelled nothing: the run completed and was stored whole, once.
    expect(await stored(conversationId)).toEqual(["user: Tell me a long story", `assistant: ${WHOLE_REPLY}`]);

    // Reloaded again, nothing streams (204): the conversation comes from the history alone.
    await page.reload();
    await expect.poll(() => resumes.map((entry) => entry.status)).toEqual([204, 200, 204]);
    await expect.poll(() => page.locator('[data-testid="message"]').allTextContents()).toEqual(["Tell me a long story", WHOLE_REPLY]);
    expect(await status.textContent()).toBe("ready");
    await page.close();
  });

  it("useChat's Stop in the React example cancels the run on the service (closing the connection no longer does)", async () => {
    const page = await browser.newPage({ viewport: { width: 800, height: 600 } });
    const resumes = watchResumes(page);
    await page.goto(`${reactSite.url}?endpoint=${encodeURIComponent(server.url)}&key=${key}`);
    const reply = page.locator('[data-testid="message"][data-role="assistant"]');
    await page.getByTestId("input").fill("Stop me");
    await page.getByTestId("send").click();
    await expect.poll(() => reply.textContent(), { timeout: 15_000 }).toMatch(/^word1 word2 word3/);
    const conversationId = (await page.getByTestId("conversation").textContent()) ?? "";
    const cancel = page.waitForResponse((response) => response.url().endsWith("/cancel") && response.request().method() === "POST");
    await page.getByTestId("stop").click();
    expect((await cancel).status()).toBe(200);
    await expect.poll(() => page.getByTestId("status").textContent()).toBe("ready");
    // Stored cancelled with what it had written: far from the whole reply, and nothing more comes.
    const [user, assistant, ...rest] = await stored(conversationId);
    expect([user, rest]).toEqual(["user: Stop me", []]);
    expect(assistant).toMatch(/^assistant: word1 word2 word3/);
    expect(assistant).not.toContain("word50");
    await page.reload();
    await expect.poll(() => resumes.map((entry) => entry.status)).toEqual([204, 204]);
    await expect.poll(() => page.locator('[data-testid="message"]').allTextContents()).toEqual(["Stop me", (assistant ?? "").slice("assistant: ".length)]);
    await page.close();
  });

  it("the widget reloaded mid-reply shows the reply streaming on to its end, once", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    const resumes = watchResumes(page);
    await page.goto(widgetSite.url);
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("Tell the widget a story");
    await page.keyboard.press("Enter");
    const replies = page.locator('[data-role="assistant"]:not([data-greeting])');
    await expect.poll(() => replies.textContent(), { timeout: 15_000 }).toMatch(/^word1 word2 word3/);
    const conversationId = await page.evaluate(() => (document.querySelector("channelkit-chat") as unknown as { conversationId: string }).conversationId);

    expect(resumes).toEqual([]);
    await page.reload();
    // Busy from the moment it is ready: the reply is on its way again.
    await hostIs(page, "[ready][busy]", 15_000);
    await page.getByTestId("launcher").click();
    await expect.poll(() => replies.textContent(), { timeout: 15_000 }).toMatch(/^word1 word2 word3/);
    expect(await replies.textContent()).not.toContain("word50");
    await screenshot(page, "widget-resumed");
    gate.open();
    await hostIs(page, ":not([busy])", 15_000);
    expect(await page.locator('[data-testid="message"]:not([data-greeting])').allTextContents()).toEqual(["Tell the widget a story", WHOLE_REPLY]);
    expect(await page.locator("[data-incomplete]").count()).toBe(0);
    expect(await page.locator("channelkit-chat").getAttribute("error")).toBeNull();
    await expect.poll(() => page.getByTestId("announcer").textContent()).toBe(WHOLE_REPLY);
    expect(resumes).toEqual([{ status: 200, protocol: "v1" }]);
    expect(await stored(conversationId)).toEqual(["user: Tell the widget a story", `assistant: ${WHOLE_REPLY}`]);

    // Reloaded once the reply is stored: the history alone, nothing to resume.
    await page.reload();
    await hostIs(page, "[ready]:not([busy])");
    await page.getByTestId("launcher").click();
    expect(await page.locator('[data-testid="message"]:not([data-greeting])').allTextContents()).toEqual(["Tell the widget a story", WHOLE_REPLY]);
    await page.close();
  });

  /** Records every error the widget's host shows, from now on. */
  async function recordErrors(page: Page): Promise<() => Promise<string[]>> {
    await page.evaluate(() => {
      const host = document.querySelector("channelkit-chat") as HTMLElement;
      const seen: string[] = [];
      (window as unknown as { errorsShown: string[] }).errorsShown = seen;
      new MutationObserver(() => {
        const error = host.getAttribute("error");
        if (error !== null) seen.push(error);
      }).observe(host, { attributes: true, attributeFilter: ["error"] });
    });
    return () => page.evaluate(() => (window as unknown as { errorsShown: string[] }).errorsShown);
  }

  it("the widget rides out a connection dropped mid-reply: it resumes the reply, shows no error, and the run is not sent twice", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    proxy.forwarded.length = 0;
    await page.goto(`${widgetSite.url}proxied`);
    await hostIs(page, "[ready]");
    const errorsShown = await recordErrors(page);
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("Through a shaky network");
    await page.keyboard.press("Enter");
    const replies = page.locator('[data-role="assistant"]:not([data-greeting])');
    await expect.poll(() => replies.textContent(), { timeout: 15_000 }).toMatch(/^word1 word2 word3/);
    const conversationId = await page.evaluate(() => (document.querySelector("channelkit-chat") as unknown as { conversationId: string }).conversationId);
    proxy.drop();
    // The reply goes on once the widget follows it again.
    await expect.poll(() => proxy.forwarded, { timeout: 15_000 }).toContain(`GET /public/widget/chat/${conversationId}/stream 200`);
    gate.open();
    await hostIs(page, ":not([busy])", 15_000);
    expect(await replies.allTextContents()).toEqual([WHOLE_REPLY]);
    expect(await page.locator("[data-incomplete]").count()).toBe(0);
    expect(await errorsShown()).toEqual([]);
    expect(await page.getByTestId("error").textContent()).toBe("");
    expect(proxy.forwarded).toContain(`GET /public/widget/chat/${conversationId}/stream 200`);
    expect(await stored(conversationId)).toEqual(["user: Through a shaky network", `assistant: ${WHOLE_REPLY}`]);
    await page.close();
  });

  it("the widget offline for longer than its retries shows the lost connection; Retry, once back, resumes the reply still streaming", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    // The page's clock, to skip the waits between its retries (3.5 s in all).
    await page.clock.install();
    proxy.forwarded.length = 0;
    await page.goto(`${widgetSite.url}proxied`);
    await hostIs(page, "[ready]");
    const host = page.locator("channelkit-chat");
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("Going through a tunnel");
    await page.keyboard.press("Enter");
    const replies = page.locator('[data-role="assistant"]:not([data-greeting])');
    await expect.poll(() => replies.textContent(), { timeout: 15_000 }).toMatch(/^word1 word2/);
    const conversationId = await page.evaluate(() => (document.querySelector("channelkit-chat") as unknown as { conversationId: string }).conversationId);
    proxy.setDown(true);
    try {
      // Retrying, not failing: no error yet, still busy.
      await page.waitForTimeout(300);
      expect(await host.getAttribute("error")).toBeNull();
      expect(await host.getAttribute("busy")).toBe("");
      for (let step = 0; step < 20 && (await host.getAttribute("error")) === null; step++) {
        await page.clock.fastForward(1000);
        await page.waitForTimeout(50);
      }
      await hostIs(page, '[error="network"]:not([busy])');
      expect(await page.getByTestId("error").textContent()).toBe("The connection was lost. Check your network and try again.");
      expect(await page.getByTestId("retry").isVisible()).toBe(true);
      expect(await page.locator("[data-incomplete]").count()).toBe(1);
      expect(await replies.textContent()).not.toContain("word50");
    } finally {
      proxy.setDown(false);
    }
    await page.getByTestId("retry").click();
    await expect.poll(() => proxy.forwarded, { timeout: 15_000 }).toContain(`GET /public/widget/chat/${conversationId}/stream 200`);
    gate.open();
    await hostIs(page, ":not([busy]):not([error])", 15_000);
    expect(await replies.allTextContents()).toEqual([WHOLE_REPLY]);
    expect(await page.locator("[data-incomplete]").count()).toBe(0);
    expect(await page.locator('[data-role="user"]').allTextContents()).toEqual(["Going through a tunnel"]);
    // Retry found the run still going and showed it: nothing sent twice.
    expect(proxy.forwarded).toContain(`GET /public/widget/chat/${conversationId}/stream 200`);
    expect(proxy.forwarded.filter((line) => line.startsWith("POST /public/widget/chat "))).toHaveLength(1);
    expect(await stored(conversationId)).toEqual(["user: Going through a tunnel", `assistant: ${WHOLE_REPLY}`]);
    await page.close();
  });

  it("without resumable streams, a dropped connection cancels the run: the loss shows at once (nothing to resume), and Retry sends again", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    proxy.forwarded.length = 0;
    await page.goto(`${widgetSite.url}plain`);
    await hostIs(page, "[ready]");
    await page.getByTestId("launcher").click();
    await page.getByTestId("input").fill("No safety net");
    await page.keyboard.press("Enter");
    const replies = page.locator('[data-role="assistant"]:not([data-greeting])');
    await expect.poll(() => replies.textContent(), { timeout: 15_000 }).toMatch(/^word1 word2 word3/);
    const conversationId = await page.evaluate(() => (document.querySelector("channelkit-chat") as unknown as { conversationId: string }).conversationId);
    proxy.drop();
    await hostIs(page, '[error="network"]:not([busy])', 15_000);
    expect(proxy.forwarded).toContain(`GET /public/widget/chat/${conversationId}/stream 204`);
    expect(await page.locator("[data-incomplete]").count()).toBe(1);
    await page.getByTestId("retry").click();
    await expect.poll(() => replies.count()).toBe(2);
    gate.open();
    await hostIs(page, ":not([busy]):not([error])", 15_000);
    expect(await replies.nth(1).textContent()).toBe(WHOLE_REPLY);
    expect(await page.locator('[data-role="user"]').allTextContents()).toEqual(["No safety net"]);
    expect(proxy.forwarded.filter((line) => line.startsWith("POST /public/widget/chat "))).toHaveLength(2);
    const history = await stored(conversationId, plainKey);
    expect(history.slice(2)).toEqual(["user: No safety net", `assistant: ${WHOLE_REPLY}`]);
    await page.close();
  });
});
