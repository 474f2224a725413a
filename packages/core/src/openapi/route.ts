import type { ServiceContext } from "../context.js";
import type { Reply } from "../http/reply.js";
import type { Route } from "../http/router.js";
import type { OpenApiDocument } from "./document.js";
import { OPENAPI_PATH } from "./operations.js";

/**
 * `GET /public/v1/openapi.json`: the document of the routes the service mounts, made on the
 * first request (a service that is never asked never pays for it) and kept: the routes of a
 * service do not change once it is created.
 */
export function openApiRoute(describe: () => OpenApiDocument): Route<ServiceContext> {
  let body: string | undefined;
  return {
    method: "GET",
    path: OPENAPI_PATH,
    handle(): Reply {
      body ??= JSON.stringify(describe());
      return { status: 200, headers: { "content-type": "application/json; charset=utf-8", "cache-control": "public, max-age=300" }, body };
    },
  };
}
