import { createChannelService, memoryStorage, OPENAPI_PATH, type OpenApiDocument, openApiDocument } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { OpenApiConformance } from "@channelkit/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { widgetAsset } from "./plugin.js";

const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, plugins: [widgetAsset()], secretKey: "cd".repeat(32) });
afterAll(() => service.close());
/** The document the service serves: its channels' routes and the plugin's. */
const served = (await (await service.handler(new Request(`http://service.test${OPENAPI_PATH}`))).json()) as OpenApiDocument;

/** The violations of an answer of `service` to `method path`, against the document it serves. */
async function violations(method: string, path: string, headers: Record<string, string> = {}): Promise<string[]> {
  const found: string[] = [];
  const response = await service.handler(new Request(`http://service.test${path}`, { method, headers }));
  await (await new OpenApiConformance(served).inspect(method, path, response, (violation) => found.push(violation))).arrayBuffer();
  return found;
}

describe("widgetAsset() in the OpenAPI document", () => {
  it("has its routes described, marked as its plugin's, and served in the service's document", async () => {
    const document = openApiDocument({ plugins: [widgetAsset()] });
    expect(Object.keys(document.paths)).toEqual(["/public/widget/widget.js"]);
    const script = document.paths["/public/widget/widget.js"] as Record<string, { operationId: string; "x-channelkit-plugin"?: string }>;
    const mounted = service.routes.filter((route) => route.path === "/public/widget/widget.js").map((route) => route.method);
    expect(mounted).toEqual(["GET", "HEAD"]);
    for (const method of mounted) expect(script[method.toLowerCase()]?.["x-channelkit-plugin"], method).toBe("widget-asset");
    expect(Object.values(script).map((operation) => operation.operationId)).toEqual(["getWidgetScript", "headWidgetScript"]);
    // No preflight: a script tag sends none.
    expect(Object.keys(served.paths["/public/widget/widget.js"] ?? {})).toEqual(["get", "head"]);
    expect(served.paths["/public/widget/widget.js"]).toEqual(JSON.parse(JSON.stringify(document.paths["/public/widget/widget.js"])));
  });

  it("answers as the document says: the script, its headers, a 304", async () => {
    expect(await violations("GET", "/public/widget/widget.js")).toEqual([]);
    expect(await violations("HEAD", "/public/widget/widget.js")).toEqual([]);
    const etag = (await service.handler(new Request("http://service.test/public/widget/widget.js"))).headers.get("etag") as string;
    expect(await violations("GET", "/public/widget/widget.js", { "if-none-match": etag })).toEqual([]);
    expect(await violations("GET", OPENAPI_PATH)).toEqual([]);
  });
});
