import { z } from "zod";
import { preflights } from "../plugin/mount.js";
import type { ChannelPlugin } from "../plugin/plugin.js";
import type { OperationSpec, ParameterSpec } from "./spec.js";

/** The plugins whose routes are the service's own, which the document does not mark with their plugin. */
const BUILT_IN = new Set(["api", "webhook", "widget", "openapi"]);

/**
 * The operations of the document, from the routes themselves: each route's own, and the
 * preflight the service derives for each path that takes `cors`. A plugin's routes are
 * marked with its id (`x-channelkit-plugin`).
 */
export function operationsOf(plugins: readonly ChannelPlugin[]): OperationSpec[] {
  const operations: OperationSpec[] = [];
  const all = plugins.flatMap((plugin) => (plugin.routes ?? []).map((route) => ({ route, plugin: BUILT_IN.has(plugin.id) ? undefined : plugin.id })));
  const cors = preflights(all.map(({ route }) => route));
  const described = new Set<string>();
  for (const { route, plugin } of all) {
    const path = openApiPath(route.path);
    const pathCors = cors.get(route.path);
    if (pathCors && !described.has(route.path)) {
      described.add(route.path);
      const first = route.doc.operationId;
      const headers = pathCors.headers.join(", ");
      operations.push({
        method: "options",
        path,
        operationId: `preflight${first[0]?.toUpperCase()}${first.slice(1)}`,
        summary: "CORS preflight",
        description: "Answers every origin (the route itself checks it); `Access-Control-Allow-Credentials` is never set.",
        tag: route.doc.tag,
        ...(plugin ? { plugin } : {}),
        security: "none",
        responses: {
          204: {
            description: "The methods and headers allowed, for 600 s.",
            values: {
              "Access-Control-Allow-Headers": pathCors.optionalHeaders.length === 0 ? headers : withOptional(pathCors.headers, pathCors.optionalHeaders),
              "Access-Control-Allow-Methods": `${pathCors.methods.join(", ")}, OPTIONS`,
              "Access-Control-Max-Age": "600",
            },
          },
        },
        errors: [],
        preflight: true,
      });
    }
    const { body, parameters = [], ...doc } = route.doc;
    const component = body?.component ?? route.body;
    operations.push({
      ...doc,
      method: route.method.toLowerCase() as OperationSpec["method"],
      path,
      ...(plugin ? { plugin } : {}),
      security: route.auth,
      parameters: [...parameters.filter((p) => p.in === "path"), ...queryParameters(route.query), ...parameters.filter((p) => p.in !== "path")],
      ...(body && component ? { body: { ...body, component } } : component ? { body: { component, required: true } } : {}),
      ...(route.rateLimited !== false ? { counted: true } : {}),
    });
  }
  return operations;
}

/** `/a/:b` as OpenAPI writes it, `/a/{b}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([^/]+)/g, "{$1}");
}

/** Every value the header may take: the headers always allowed, then with each combination of those allowed when asked. */
function withOptional(headers: readonly string[], optional: readonly string[]): string[] {
  const values: string[] = [];
  for (let mask = 0; mask < 1 << optional.length; mask++) {
    values.push([...headers, ...optional.filter((_, i) => mask & (1 << i))].join(", "));
  }
  return values;
}

/** The query parameters of a route's `query` schema (a zod object), each described by its field's `description`. */
function queryParameters(schema: z.ZodType | undefined): ParameterSpec[] {
  if (!schema) return [];
  if (!(schema instanceof z.ZodObject)) throw new Error("channelkit: a route's `query` schema is a zod object");
  return Object.entries(schema.shape as Record<string, z.ZodType>).map(([name, field]) => ({
    name,
    in: "query",
    description: z.globalRegistry.get(field)?.description ?? name,
    schema: field,
  }));
}
