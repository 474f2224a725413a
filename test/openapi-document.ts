/**
 * The OpenAPI document of every route of channelkit and of its plugins: what
 * `docs/openapi.json` holds (`npm run openapi` writes it from this, test/openapi.test.ts
 * checks it). Here rather than in `@channelkit/core`, since the widget's script is a route
 * of `@channelkit/widget`, which depends on core.
 */
import { type OpenApiDocument, openApiDocument } from "@channelkit/core";
import { corePlugins } from "../packages/testkit/src/core-plugins.js";
import { widgetAsset } from "../packages/widget/src/plugin.js";

/** The plugins whose routes `docs/openapi.json` describes, channelkit's own channels first. */
export function documentedPlugins() {
  return [...corePlugins(), widgetAsset()];
}

/** The document `docs/openapi.json` holds. */
export function channelkitOpenApiDocument(): OpenApiDocument {
  return openApiDocument({ plugins: documentedPlugins() });
}
