import type { Reply } from "../http/reply.js";
import type { ChannelPlugin } from "../plugin/plugin.js";
import { defineRoute } from "../plugin/route.js";
import type { OpenApiDocument } from "./document.js";

/** Path of the document as the service serves it (under its `basePath`). */
export const OPENAPI_PATH = "/public/v1/openapi.json";

/**
 * `GET /public/v1/openapi.json`: the document of the routes the service mounts, made on the
 * first request (a service that is never asked never pays for it) and kept: the routes of a
 * service do not change once it is created.
 */
export function openApiPlugin(describe: () => OpenApiDocument): ChannelPlugin {
  let body: string | undefined;
  return {
    id: "openapi",
    routes: [
      defineRoute({
        method: "GET",
        path: OPENAPI_PATH,
        auth: "none",
        rateLimited: false,
        doc: {
          operationId: "getOpenApiDocument",
          summary: "This document",
          description: "The OpenAPI document of the routes this service mounts. Turned off with `createChannelService({ openapi: false })`.",
          tag: "service",
          responses: {
            200: {
              description: "The OpenAPI 3.1 document.",
              other: {
                mediaType: "application/json",
                description: "An OpenAPI 3.1 document.",
                schema: {
                  type: "object",
                  required: ["openapi", "info", "paths"],
                  properties: { openapi: { type: "string", pattern: "^3\\.1\\.\\d+$" }, info: { type: "object" }, paths: { type: "object" } },
                },
              },
              headers: ["Cache-Control-Public"],
            },
          },
          errors: ["runtime_error"],
        },
        handle(): Reply {
          body ??= JSON.stringify(describe());
          return { status: 200, headers: { "content-type": "application/json; charset=utf-8", "cache-control": "public, max-age=300" }, body };
        },
      }),
    ],
  };
}
