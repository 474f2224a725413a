import { createChannelService, memoryStorage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { afterAll, describe, expect, it } from "vitest";
import { matchesEtag } from "./asset.js";
import { widgetAsset } from "./plugin.js";

const SECRET_KEY = "ab".repeat(32);
const URL_ = "http://service.test/public/widget/widget.js";
const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, plugins: [widgetAsset()], secretKey: SECRET_KEY });

afterAll(() => service.close());

describe("widgetAsset", () => {
  it("serves the loader as JavaScript, cached publicly for 5 minutes, with an ETag", async () => {
    const response = await service.handler(new Request(URL_));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(response.headers.get("cache-control")).toBe("public, max-age=300");
    expect(response.headers.get("etag")).toMatch(/^"[\w-]{27}"$/);
    const script = await response.text();
    // The built IIFE: it defines the element and bundles the SSE parser (nothing left to import).
    expect(script).toContain("channelkit-chat");
    expect(script).not.toMatch(/\bimport\s*[{("']/);
    expect(script.length).toBeGreaterThan(1000);
  });

  it("answers 304 without a body to a matching If-None-Match, and the script to a stale one", async () => {
    const etag = (await service.handler(new Request(URL_))).headers.get("etag") as string;
    for (const header of [etag, `W/${etag}`, `"stale", ${etag}`, "*"]) {
      const response = await service.handler(new Request(URL_, { headers: { "if-none-match": header } }));
      expect(response.status, header).toBe(304);
      expect(response.headers.get("etag")).toBe(etag);
      expect(await response.text()).toBe("");
    }
    const stale = await service.handler(new Request(URL_, { headers: { "if-none-match": '"stale"' } }));
    expect(stale.status).toBe(200);
    expect((await stale.text()).length).toBeGreaterThan(1000);
  });

  it("answers HEAD with the headers only, and refuses other methods", async () => {
    const head = await service.handler(new Request(URL_, { method: "HEAD" }));
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    const post = await service.handler(new Request(URL_, { method: "POST" }));
    expect(post.status).toBe(405);
  });

  it("is served under the service's basePath", async () => {
    const mounted = await createChannelService({
      storage: memoryStorage(),
      flows: demoFlows,
      plugins: [widgetAsset()],
      basePath: "/chat",
      secretKey: SECRET_KEY,
    });
    const response = await mounted.handler(new Request("http://service.test/chat/public/widget/widget.js"));
    expect(response.status).toBe(200);
    await mounted.close();
  });
});

describe("matchesEtag", () => {
  it("compares weakly, over a list, and * matches anything", () => {
    expect(matchesEtag('"a"', '"a"')).toBe(true);
    expect(matchesEtag('W/"a"', '"a"')).toBe(true);
    expect(matchesEtag(' "b" , "a" ', '"a"')).toBe(true);
    expect(matchesEtag("*", '"a"')).toBe(true);
    expect(matchesEtag('"b"', '"a"')).toBe(false);
    expect(matchesEtag(null, '"a"')).toBe(false);
  });
});
