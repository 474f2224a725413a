/**
 * The client in a browser: bundled for the browser with esbuild (so no Node built-in can hide
 * in it), loaded by a page of its own origin in Chromium (playwright-core, as the widget's
 * browser tests drive it), talking to a real service on 127.0.0.1 across origins with a
 * publishable key: execute, a stream read to its end and one aborted, history, an execute sent
 * twice with one Idempotency-Key (the preflight allows the header), a typed error, and a
 * signature computed with the browser's Web Crypto.
 */
import { signRequestBody } from "@channelkit/core";
import { build } from "esbuild";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserMissing, launchChromium, staticSite } from "../../../test/browser.js";
import { startServer, type TestServer } from "./test-server.js";

const missing = browserMissing();
if (missing) console.warn(`client browser test skipped: ${missing}`);

describe.skipIf(missing !== null)("the client bundled for the browser, in Chromium", () => {
  let server: TestServer;
  let browser: Browser;
  let site: Awaited<ReturnType<typeof staticSite>>;
  let bundle: string;

  beforeAll(async () => {
    const built = await build({
      entryPoints: [new URL("./index.ts", import.meta.url).pathname],
      bundle: true,
      format: "esm",
      platform: "browser",
      target: "es2022",
      minify: true,
      write: false,
    });
    bundle = built.outputFiles[0]?.text ?? "";
    site = await staticSite((path) => {
      if (path === "/client.js") return { type: "text/javascript; charset=utf-8", body: bundle };
      if (path === "/")
        return {
          type: "text/html; charset=utf-8",
          body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>client</title></head><body>
<script type="module">import * as channelkit from "/client.js"; window.channelkit = channelkit;</script></body></html>`,
        };
      return undefined;
    });
    [server, browser] = await Promise.all([startServer(), launchChromium()]);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await site?.close();
    await server?.close();
  });

  it("execute, stream (whole, and aborted mid-way), history, an execute sent again with its Idempotency-Key, a typed error and a signature, from a page of another origin", async () => {
    const echo = await server.channel({ flow: "echo", mode: "public", allowedOrigins: [site.origin] });
    const slow = await server.channel({ flow: "slow", mode: "public", allowedOrigins: [site.origin] });
    const page = await browser.newPage();
    const failed: string[] = [];
    page.on("pageerror", (error) => failed.push(error.message));
    await page.goto(site.url);
    await page.waitForFunction(() => "channelkit" in window);
    const result = await page.evaluate(
      async ({ baseUrl, echoKey, slowKey }) => {
        // The bundle's exports, as the page's module script put them on window.
        const ck = (window as unknown as { channelkit: typeof import("./index.js") }).channelkit;
        const client = ck.createClient({ baseUrl, apiKey: echoKey });
        const run = await client.execute({ payload: "from Chromium" });
        const reply = await client.stream({ payload: "streamed in Chromium", conversation_id: run.conversation_id });
        const types: string[] = [];
        let text = "";
        for await (const chunk of reply) {
          types.push(chunk.type);
          if (chunk.type === "text-delta") text += chunk.delta;
        }
        const history = await client.history(run.conversation_id);
        // Every execute carries an Idempotency-Key across origins (the preflight allows it): the same key answers the first run again.
        const keyed = await client.execute({ payload: "keyed in Chromium" }, { idempotencyKey: "browser-order-1" });
        const keyedAgain = await client.execute({ payload: "keyed in Chromium" }, { idempotencyKey: "browser-order-1" });

        const controller = new AbortController();
        const long = await ck.createClient({ baseUrl, apiKey: slowKey }).stream({ payload: "long" }, { signal: controller.signal });
        const deltas: string[] = [];
        let aborted = "";
        try {
          for await (const chunk of long) {
            if (chunk.type !== "text-delta") continue;
            deltas.push(chunk.delta);
            if (deltas.length === 2) controller.abort();
          }
        } catch (error) {
          aborted = (error as Error).name;
        }

        let refused: unknown = null;
        try {
          await ck.createClient({ baseUrl, apiKey: "svc_pub_not_a_key" }).execute({ payload: "x" });
        } catch (error) {
          const e = error as InstanceType<typeof ck.ChannelkitError>;
          refused = { isChannelkitError: e instanceof ck.ChannelkitError, status: e.status, code: e.code };
        }
        const signature = await ck.signatureHeader("svc_sig_browser", JSON.stringify({ payload: "Grüße 😀" }), 1_700_000_000);
        return {
          run: { status: run.status, messages: run.output?.messages, conversationId: run.conversation_id },
          streamed: { runIds: reply.run, types, text },
          history: history.messages.map((message) => message.content),
          keyed: [keyed.run_id, keyedAgain.run_id],
          aborted: { name: aborted, deltas, runId: long.runId },
          refused,
          signature,
        };
      },
      { baseUrl: server.url, echoKey: echo.key, slowKey: slow.key },
    );
    await page.close();

    expect(failed).toEqual([]);
    expect(result.run).toMatchObject({ status: "success", messages: [{ role: "assistant", content: "Echo: from Chromium" }] });
    expect(result.streamed.runIds?.conversation_id).toBe(result.run.conversationId);
    expect(result.streamed.types[0]).toBe("data-run");
    expect(result.streamed.types.slice(-2)).toEqual(["text-end", "finish"]);
    expect(result.streamed.text).toBe("Echo: streamed in Chromium");
    expect(result.history).toEqual(["from Chromium", "Echo: from Chromium", "streamed in Chromium", "Echo: streamed in Chromium"]);
    expect(result.aborted).toMatchObject({ name: "AbortError", deltas: ["word1 ", "word2 "] });
    expect(result.refused).toEqual({ isChannelkitError: true, status: 401, code: "invalid_api_key" });
    expect(result.keyed[0]).toBe(result.keyed[1]);
    expect(result.signature).toBe(await signRequestBody("svc_sig_browser", JSON.stringify({ payload: "Grüße 😀" }), 1_700_000_000));
    // The aborted stream closed its connection: the service stored the run cancelled.
    await expect.poll(async () => (await server.target.storage.findRun(result.aborted.runId as string))?.status, { timeout: 5000 }).toBe("cancelled");
  });
});
