import type { z } from "zod";
import type { RequestComponent, ResponseComponent } from "./components.js";

/** How a route is authenticated: a scheme of channelkit's, or security schemes of a plugin's own (OpenAPI objects, by name). */
export type Security = "channelKey" | "publishableKey" | "admin" | "bridge" | "none" | { schemes: Record<string, Record<string, unknown>> };

/** A parameter of a route: in its path, its query or its headers. */
export interface ParameterSpec {
  name: string;
  in: "path" | "query" | "header";
  description: string;
  required?: boolean;
  /** The value's schema (a query's integer, not the string it is sent as); a string when absent. */
  schema?: z.ZodType;
}

/** A success answer of a route. */
export interface SuccessSpec {
  description: string;
  /** `application/json`: the component of its body, or a zod schema of a plugin's. */
  json?: ResponseComponent | z.ZodType;
  /** `text/event-stream`: the component of one of its events, or a zod schema of a plugin's. */
  sse?: ResponseComponent | z.ZodType;
  /** A body of another media type or shape, described by its text (a string, unless `schema` says otherwise). */
  other?: { mediaType: string; description: string; schema?: Record<string, unknown> };
  /** Headers this answer always carries, by component name. */
  headers?: HeaderName[];
  /** Headers it carries in some cases only (e.g. a stream's, on a route that may answer JSON). */
  optionalHeaders?: HeaderName[];
  /** Headers it always carries with exactly this value (or one of these). */
  values?: Partial<Record<HeaderName, string | string[]>>;
}

/** The response headers the document describes, by component name. */
export type HeaderName =
  | "Access-Control-Allow-Headers"
  | "Access-Control-Allow-Methods"
  | "Access-Control-Max-Age"
  | "Connection"
  | "Cache-Control-Stream"
  | "Cache-Control-No-Store"
  | "Cache-Control-Public"
  | "X-Accel-Buffering"
  | "X-Vercel-AI-UI-Message-Stream"
  | "ETag"
  | "Idempotent-Replayed";

/**
 * What a route tells of itself for the OpenAPI document: everything but its method and path.
 * A plugin's route writes it the same way as channelkit's own.
 */
export interface OperationDoc {
  /** Unique across the service, e.g. `execute`, `telegramUpdate`. */
  operationId: string;
  summary: string;
  description?: string;
  /** A tag of channelkit's, or a plugin's own tag. */
  tag: Tag | { name: string; description: string };
  /** Descriptions of the path parameters, and the headers the route reads (the query's come from its `query` schema). */
  parameters?: ParameterSpec[];
  /** The JSON body: a request component of channelkit's, or the route's `body` schema when absent. */
  body?: { component?: RequestComponent; required: boolean; description?: string };
  /** The success answers, by status. */
  responses: Record<number, SuccessSpec>;
  /** Every error code the route may answer in the envelope, a plugin's own included; each status gets those of its codes. */
  errors: string[];
  /** Whether its 404 is history's `{ detail }` (a conversation it cannot see) rather than the envelope. */
  detailNotFound?: boolean;
}

/** One operation of the document: a route of the service and everything it may answer. */
export interface OperationSpec extends Omit<OperationDoc, "body"> {
  method: "get" | "head" | "post" | "put" | "patch" | "delete" | "options";
  /** The route's path, `{name}` for a parameter. */
  path: string;
  /** The plugin that mounts the route, when the service does not always mount it. */
  plugin?: string;
  security: Security;
  body?: { component: RequestComponent | z.ZodType; required: boolean; description?: string };
  /** Whether it counts against a rate limit (`RateLimit` headers on its answers). */
  counted?: boolean;
  /** A CORS preflight: its `Access-Control-Allow-Methods` names the path's methods. */
  preflight?: boolean;
}

/** The tags of the document, in the order they are listed. */
export const TAGS = {
  api: { name: "API channel", description: "Execute a flow and read a conversation, with a server key or a publishable key." },
  streams: { name: "Resumable streams", description: "On a channel with `resumable_streams`: follow the run in flight from any instance, or stop it." },
  livechat: { name: "Live chat", description: "The user's side of a handover to a human: the conversation's live chat as events, and leaving it." },
  widget: { name: "Widget", description: "The embeddable chat widget's routes, publishable keys only." },
  webhook: {
    name: "Webhook channel",
    description: "Two unauthenticated routes scoped by a channel's `client_id` (a signature when the channel requires one).",
  },
  admin: { name: "Admin", description: "Channel settings, keys, signing secrets and the audit trail, behind an admin JWT: mounted by `adminApi()`." },
  inbox: { name: "Live-chat inbox", description: "The built-in agent inbox behind an admin JWT: mounted by `liveChatInbox()`." },
  bridge: { name: "Live-chat bridge", description: "The help desk's events, signed: mounted by `liveChatWebhookBridge()`." },
  service: { name: "Service", description: "This document, and the widget's script (`widgetAsset()` of `@channelkit/widget`)." },
} as const;

/** A tag's key. */
export type Tag = keyof typeof TAGS;
