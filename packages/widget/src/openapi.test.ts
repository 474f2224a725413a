import { createChannelService, memoryStorage, OPENAPI_PATH, openApiDocument } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { OpenApiConformance } from "@channelkit/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { widgetAsset } from "./plugin.js";

const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, plugins: [widgetAsset()], secretKey: "cd".repeat(32) });
afterAll(() => service.close());

/** The violations of an answer of `service` to `method path`, against the whole document. */
async function violations(method: string, path: string, headers: Record<string, string> = {}): Promise<string[]> {
  const found: string[] = [];
  const response = await service.handler(new Request(`http://service.test${path}`, { method, headers }));
  await (await new OpenApiConformance().inspect(method, path, response, (violation) => found.push(violation))).arrayBuffer();
  return found;
}

describe("widgetAsset() in the OpenAPI document", () => {
  it("has its routes described, marked as its plugin's, and served in the service's document", async () => {
    const document = openApiDocument();
    const script = document.paths["/public/widget/widget.js"] as Record<string, { "x-channelkit-plugin"?: string }>;
    for (const route of service.routes.filter((route) => route.path === "/public/widget/widget.js")) {
      expect(script[route.method.toLowerCase()]?.["x-channelkit-plugin"], route.method).toContain("widgetAsset()");
    }
    const served = (await (await service.handler(new Request(`http://service.test${OPENAPI_PATH}`))).json()) as typeof document;
    expect(Object.keys(served.paths["/public/widget/widget.js"] ?? {})).toEqual(["get", "head"]);
  });

  it("answers as the document says: the script, its headers, a 304", async () => {
    expect(await violations("GET", "/public/widget/widget.js")).toEqual([]);
    expect(await violations("HEAD", "/public/widget/widget.js")).toEqual([]);
    const etag = (await service.handler(new Request("http://service.test/public/widget/widget.js"))).headers.get("etag") as string;
    expect(await violations("GET", "/public/widget/widget.js", { "if-none-match": etag })).toEqual([]);
    expect(await violations("GET", OPENAPI_PATH)).toEqual([]);
  });
});
