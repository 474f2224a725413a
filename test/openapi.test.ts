import { readFileSync } from "node:fs";
import { coreOpenApiDocument } from "@channelkit/testkit";
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { channelkitOpenApiDocument } from "./openapi-document.js";

const CHECKED_IN = new URL("../docs/openapi.json", import.meta.url);

describe("docs/openapi.json", () => {
  const document = channelkitOpenApiDocument();

  it("is the document of every route of channelkit and its plugins (`npm run openapi` writes it)", () => {
    const file = JSON.parse(readFileSync(CHECKED_IN, "utf8")) as unknown;
    expect(file, "docs/openapi.json is stale: run `npm run openapi` and commit docs/openapi.json").toEqual(JSON.parse(JSON.stringify(document)));
  });

  it("is a valid OpenAPI 3.1 document, each operation named once", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as unknown as Parameters<Validator["validate"]>[0]);
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    const ids = Object.values(document.paths).flatMap((item) => Object.values(item).map((operation) => (operation as { operationId: string }).operationId));
    expect(ids.filter((id, index) => ids.indexOf(id) !== index)).toEqual([]);
  });

  it("is, but the widget's script (@channelkit/widget), the document the contract suite checks answers against", () => {
    const core = JSON.parse(JSON.stringify(coreOpenApiDocument()));
    const { "/public/widget/widget.js": script, ...paths } = JSON.parse(JSON.stringify(document.paths));
    expect(Object.keys(script)).toEqual(["get", "head"]);
    expect(core.paths).toEqual(paths);
    expect(core.components).toEqual(JSON.parse(JSON.stringify(document.components)));
  });
});
