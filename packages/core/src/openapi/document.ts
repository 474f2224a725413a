import { z } from "zod";
import { componentSchemas, inlineSchema, type JsonSchema, ref, type RequestComponent, type ResponseComponent } from "./components.js";
import type { ChannelPlugin } from "../plugin/plugin.js";
import { operationsOf } from "./derive.js";
import { codesWithStatus, definitionOf, statusesOf } from "./errors.js";
import type { HeaderName, OperationSpec, ParameterSpec, SuccessSpec } from "./spec.js";
import { TAGS } from "./spec.js";

/** An OpenAPI 3.1 document, as plain JSON. */
export interface OpenApiDocument {
  openapi: "3.1.1";
  info: { title: string; version: string; description: string; license: { name: string; identifier: string } };
  servers?: { url: string; description?: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, unknown>>;
  components: {
    schemas: Record<string, JsonSchema>;
    responses: Record<string, unknown>;
    headers: Record<string, unknown>;
    securitySchemes: Record<string, unknown>;
  };
}

/** Options of {@link openApiDocument}. */
export interface OpenApiDocumentOptions {
  /** The plugins whose routes the document describes: a service passes those it mounts, its channels included. */
  plugins: readonly ChannelPlugin[];
  /** The service's `basePath`, written as the document's server, e.g. `/chat`. */
  basePath?: string;
}

/**
 * The OpenAPI 3.1 document of routes, generated from the routes themselves (their zod
 * schemas, their `doc`, their `cors`): every route, parameter, body, answer, header, security
 * scheme, error code per route, and the events of its server-sent event streams. A service
 * serves the document of its own routes at `GET /public/v1/openapi.json`, plugins' included;
 * `docs/openapi.json` is that of every route of channelkit and its plugins.
 */
export function openApiDocument(options: OpenApiDocumentOptions): OpenApiDocument {
  const operations = operationsOf(options.plugins);
  const paths: OpenApiDocument["paths"] = {};
  for (const operation of operations) {
    paths[operation.path] = { ...paths[operation.path], [operation.method]: operationObject(operation) };
  }
  const builtInTags = new Set<string>(operations.flatMap((operation) => (typeof operation.tag === "string" ? [operation.tag] : [])));
  const pluginTags = new Map<string, { name: string; description: string }>();
  for (const operation of operations) if (typeof operation.tag === "object") pluginTags.set(operation.tag.name, operation.tag);
  const schemes: Record<string, unknown> = { ...SECURITY_SCHEMES };
  for (const operation of operations) if (typeof operation.security === "object") Object.assign(schemes, operation.security.schemes);
  const basePath = (options.basePath ?? "").replace(/\/+$/, "");
  return {
    openapi: "3.1.1",
    info: {
      title: "channelkit",
      version: "1",
      description: DESCRIPTION,
      license: { name: "MIT", identifier: "MIT" },
    },
    ...(basePath ? { servers: [{ url: basePath, description: "The service's basePath" }] } : {}),
    tags: [
      ...Object.entries(TAGS)
        .filter(([key]) => builtInTags.has(key))
        .map(([, tag]) => ({ ...tag })),
      ...[...pluginTags.values()].map((tag) => ({ ...tag })),
    ],
    paths,
    components: {
      schemas: componentSchemas(),
      responses: {
        RateLimited: errorResponse("Over a rate limit (a failed authentication past its limit too): retry after `Retry-After` seconds.", ["rate_limited"], {
          ...corsHeaders(false),
          "Access-Control-Expose-Headers": header("Access-Control-Expose-Headers"),
          "Retry-After": header("Retry-After", true),
          RateLimit: header("RateLimit", true),
          "RateLimit-Policy": header("RateLimit-Policy", true),
        }),
        TooManyRequests: errorResponse(
          "Over a rate limit (`rate_limited`, with the RateLimit fields) or over the caps on streams open at once (`too_many_streams`: the service's `streamLimits`, per key and per client address, counted per process): retry after `Retry-After` seconds.",
          ["rate_limited", "too_many_streams"],
          {
            ...corsHeaders(false),
            "Access-Control-Expose-Headers": header("Access-Control-Expose-Headers"),
            "Retry-After": header("Retry-After", true),
            RateLimit: header("RateLimit"),
            "RateLimit-Policy": header("RateLimit-Policy"),
          },
        ),
        RuntimeError: errorResponse("A failure of the service itself (database down, a bug); a flow's failure is a run outcome instead.", ["runtime_error"]),
      },
      headers: HEADERS,
      securitySchemes: schemes,
    },
  };
}

/** The document as `docs/openapi.json` holds it (before the formatter). */
export function openApiText(document: OpenApiDocument): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/** `GET /a/:b` and `get /a/{b}` alike: an operation's key. */
export function routeKey(method: string, path: string): string {
  return `${method.toUpperCase()} ${path.replace(/:([^/]+)/g, "{$1}")}`;
}

const DESCRIPTION = [
  "The HTTP routes of a channelkit service: the API channel (execute, history), the widget, the webhook channel, the live chat, the resumable streams, and the routes of channelkit's plugins (`adminApi()`, `liveChatInbox()`, `liveChatWebhookBridge()`, `widgetAsset()`), each marked `x-channelkit-plugin`. Generated from the zod schemas the service validates and answers with; the contract suite checks every answer it receives against it.",
  "",
  'Errors answer `{ "error": { "code", "message" } }` with the status of the code (the codes each route may answer are listed with it), except the `{ "detail" }` 404 of history and the routes beside it. Any route may also answer `429 rate_limited` when it counts a request, and `500 runtime_error`; a route whose answer stays open (an event stream, a streamed run) answers `429 too_many_streams` past the caps on streams open at once. A path the service does not have is `404 not_found`; a method it does not take there, `405 method_not_allowed` with `Allow`. Behind `@channelkit/node` (`channelkit serve`), what the HTTP parser refuses is `400 bad_request`, `408 request_timeout` or `431 headers_too_large`, in the envelope, and a request that arrives on an open connection while the server shuts down is `503 service_draining` with `Retry-After` and `Connection: close`, before anything runs: send it again.',
  "",
  "A request with an `Origin` gets it back in `Access-Control-Allow-Origin` (with `Vary: Origin`), on every answer; credentials are never allowed.",
].join("\n");

/** The response headers, by component name. */
const HEADERS: Record<string, { description: string; schema: JsonSchema }> = {
  "Access-Control-Allow-Origin": { description: "The request's `Origin`, when it sent one (printable ASCII).", schema: { type: "string" } },
  Vary: { description: "`Origin`, when the request sent one.", schema: { type: "string" } },
  "Access-Control-Expose-Headers": {
    description:
      "`Retry-After, RateLimit, RateLimit-Policy`, when the request sent an `Origin` and was counted; `Retry-After` alone on another answer that has one.",
    schema: { type: "string" },
  },
  RateLimit: {
    description:
      'What is left of each limit the request was counted against (IETF RateLimit fields): `"<policy>";r=<remaining>;t=<seconds to reset>`, comma-separated.',
    schema: inlineSchema(z.string().regex(/^"[a-z_]+";r=\d+;t=\d+(, "[a-z_]+";r=\d+;t=\d+)*$/)),
  },
  "RateLimit-Policy": {
    description: 'Each limit the request was counted against: `"<policy>";q=<requests>;w=<window seconds>`, comma-separated.',
    schema: inlineSchema(z.string().regex(/^"[a-z_]+";q=\d+;w=\d+(, "[a-z_]+";q=\d+;w=\d+)*$/)),
  },
  "Retry-After": { description: "Seconds to wait before retrying.", schema: inlineSchema(z.string().regex(/^\d+$/)) },
  "Access-Control-Allow-Headers": { description: "The request headers the route takes.", schema: { type: "string" } },
  "Access-Control-Allow-Methods": { description: "The methods of the path.", schema: { type: "string" } },
  "Access-Control-Max-Age": { description: "How long a browser may keep the preflight's answer, in seconds.", schema: { type: "string" } },
  Connection: {
    description: "`keep-alive`: the stream stays open (HTTP/1.1). Hop-by-hop: absent over HTTP/2 and from a Cloudflare Worker, which drops it.",
    schema: { type: "string", const: "keep-alive" },
  },
  "Cache-Control-Stream": { description: "`Cache-Control` of an event stream.", schema: { type: "string", const: "no-cache, no-transform" } },
  "Cache-Control-No-Store": { description: "`Cache-Control`: never cached, since settings change at any time.", schema: { type: "string", const: "no-store" } },
  "Cache-Control-Public": { description: "`Cache-Control`: cached publicly for 5 minutes.", schema: { type: "string", const: "public, max-age=300" } },
  "X-Accel-Buffering": { description: "Tells nginx not to buffer the stream.", schema: { type: "string", const: "no" } },
  "X-Vercel-AI-UI-Message-Stream": {
    description: "Marks the AI SDK UI message stream, so that the AI SDK's client reads it unchanged.",
    schema: { type: "string", const: "v1" },
  },
  ETag: { description: "The script's version.", schema: { type: "string" } },
  "Idempotent-Replayed": {
    description: "`true` on an answer replayed for an `Idempotency-Key` already answered: the flow did not run again.",
    schema: { type: "string", const: "true" },
  },
};

/** The real name of a header component (some names tell apart two values of one header). */
function headerName(component: string): string {
  return component.startsWith("Cache-Control-") ? "Cache-Control" : component;
}

const SECURITY_SCHEMES = {
  serverKey: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "svc_live_… or svc_test_…",
    description:
      "A channel's server key (`svc_live_` for `prod` channels, `svc_test_` for `dev` and `staging`): for servers only, never in a browser or an app. The key selects the channel.",
  },
  publishableKey: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "svc_pub_…",
    description: "A channel's publishable key (`svc_pub_`), for browsers and apps: an `Origin`, when sent, must be one of the channel's `allowed_origins`.",
  },
  adminToken: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description:
      "An admin JWT (HS256 with the service's secret, or RS256/ES256 from its JWKS) whose `tenant_ids` (or `organization_id`) grants the tenant of `X-Tenant-ID`. Channel keys are refused. A development mode, when explicitly enabled, takes requests without a token (still with `X-Tenant-ID`).",
  },
  tenantId: { type: "apiKey", in: "header", name: "X-Tenant-ID", description: "The tenant the admin call acts on: 401 `missing_tenant` without it." },
  bridgeSignature: {
    type: "apiKey",
    in: "header",
    name: "X-Channelkit-Signature",
    description: '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` keyed with the bridge\'s secret, within 300 s of now.',
  },
};

const SECURITY: Record<Extract<OperationSpec["security"], string>, Record<string, string[]>[]> = {
  channelKey: [{ serverKey: [] }, { publishableKey: [] }],
  publishableKey: [{ publishableKey: [] }],
  admin: [{ adminToken: [], tenantId: [] }],
  bridge: [{ bridgeSignature: [] }],
  none: [],
};

function operationObject(operation: OperationSpec): Record<string, unknown> {
  return {
    operationId: operation.operationId,
    summary: operation.summary,
    ...(operation.description ? { description: operation.description } : {}),
    tags: [typeof operation.tag === "string" ? TAGS[operation.tag].name : operation.tag.name],
    security: typeof operation.security === "string" ? SECURITY[operation.security] : Object.keys(operation.security.schemes).map((name) => ({ [name]: [] })),
    ...(operation.parameters?.length ? { parameters: operation.parameters.map(parameterObject) } : {}),
    ...(operation.body
      ? {
          requestBody: {
            required: operation.body.required,
            ...(operation.body.description ? { description: operation.body.description } : {}),
            content: { "application/json": { schema: schemaOf(operation.body.component, "input") } },
          },
        }
      : {}),
    responses: responsesOf(operation),
    ...(operation.plugin ? { "x-channelkit-plugin": operation.plugin } : {}),
  };
}

/** A component of channelkit's by name, or a plugin's zod schema written inline. */
function schemaOf(component: RequestComponent | ResponseComponent | z.ZodType, io: "input" | "output"): Record<string, unknown> {
  return typeof component === "string" ? ref(component) : inlineSchema(component, io);
}

function parameterObject(parameter: ParameterSpec): Record<string, unknown> {
  const schema = parameter.schema ? inlineSchema(parameter.schema) : { type: "string" };
  return {
    name: parameter.name,
    in: parameter.in,
    description: parameter.description,
    required: parameter.required ?? false,
    schema,
  };
}

function responsesOf(operation: OperationSpec): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, success] of Object.entries(operation.responses)) responses[status] = successResponse(success, operation.counted === true);
  const statuses = statusesOf(operation.errors);
  if (operation.detailNotFound && !statuses.includes(404)) statuses.push(404);
  for (const status of statuses.sort((a, b) => a - b)) {
    if (status === 429) {
      const streamed = operation.errors.includes("too_many_streams");
      responses[status] = { $ref: `#/components/responses/${streamed ? "TooManyRequests" : "RateLimited"}` };
    } else if (status === 500) responses[status] = { $ref: "#/components/responses/RuntimeError" };
    else if (status === 404 && operation.detailNotFound) responses[status] = detailNotFoundResponse(operation);
    else {
      const codes = codesWithStatus(operation.errors, status);
      // A key in use says when to send the request again.
      const retryAfter = codes.includes("idempotency_key_in_use") ? { "Retry-After": header("Retry-After") } : {};
      responses[status] = errorResponse(describeCodes(codes), codes, { ...corsHeaders(operation.counted === true), ...retryAfter });
    }
  }
  return responses;
}

function successResponse(success: SuccessSpec, counted: boolean): Record<string, unknown> {
  const headers: Record<string, unknown> = { ...corsHeaders(counted) };
  for (const name of success.headers ?? []) headers[headerName(name)] = header(name, true);
  for (const name of success.optionalHeaders ?? []) headers[headerName(name)] = header(name);
  for (const [name, value] of Object.entries(success.values ?? {}) as [HeaderName, string | string[]][]) {
    const schema = Array.isArray(value) ? { type: "string", enum: value } : { type: "string", const: value };
    headers[headerName(name)] = { description: HEADERS[name]?.description, required: true, schema };
  }
  const content: Record<string, unknown> = {};
  if (success.json) content["application/json"] = { schema: schemaOf(success.json, "output") };
  if (success.sse) content["text/event-stream"] = { schema: schemaOf(success.sse, "output") };
  if (success.other) content[success.other.mediaType] = { schema: { type: "string", ...success.other.schema, description: success.other.description } };
  return {
    description: success.description,
    ...(Object.keys(headers).length ? { headers } : {}),
    ...(Object.keys(content).length ? { content } : {}),
  };
}

/**
 * A header of an answer: a reference to its component, or the component itself when it is
 * required (a reference takes no `required` beside it).
 */
function header(component: HeaderName | keyof typeof HEADERS, required = false): Record<string, unknown> {
  const object = HEADERS[component];
  if (!object) throw new Error(`channelkit: no header component ${component}`);
  return required ? { ...object, required: true } : { $ref: `#/components/headers/${component}` };
}

/** The headers of every answer: CORS, and the rate limits' on routes that count requests. */
function corsHeaders(counted: boolean): Record<string, unknown> {
  return {
    "Access-Control-Allow-Origin": header("Access-Control-Allow-Origin"),
    Vary: header("Vary"),
    ...(counted
      ? {
          "Access-Control-Expose-Headers": header("Access-Control-Expose-Headers"),
          RateLimit: header("RateLimit"),
          "RateLimit-Policy": header("RateLimit-Policy"),
        }
      : {}),
  };
}

/** An error answer in the envelope, its `code` one of `codes`. */
function errorResponse(description: string, codes: readonly string[], headers: Record<string, unknown> = corsHeaders(false)): Record<string, unknown> {
  return {
    description,
    headers,
    content: {
      "application/json": {
        schema: {
          allOf: [
            ref("ErrorEnvelope"),
            { type: "object", properties: { error: { type: "object", properties: { code: { type: "string", enum: [...codes] } } } } },
          ],
        },
      },
    },
  };
}

function detailNotFoundResponse(operation: OperationSpec): Record<string, unknown> {
  const codes = codesWithStatus(operation.errors, 404);
  if (codes.length > 0) throw new Error(`channelkit: ${operation.operationId} answers 404 both as { detail } and in the envelope`);
  return {
    description: "No conversation with this id that this key may see: none, or another channel's or tenant's. History's format, not the envelope.",
    headers: corsHeaders(operation.counted === true),
    content: { "application/json": { schema: ref("ConversationDetailNotFound") } },
  };
}

function describeCodes(codes: readonly string[]): string {
  return codes.map((code) => `\`${code}\`: ${definitionOf(code).message}`).join(" ");
}
