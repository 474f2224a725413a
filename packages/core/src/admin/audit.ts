import { fromBase64Url, toBase64Url, utf8 } from "../auth/encoding.js";
import { ServiceError } from "../http/errors.js";
import type { AuditEventRecord, AuditQuery, DeletedConversation } from "../storage/types.js";
import type { ChannelView } from "./channel-view.js";
import type { auditOperationSchema } from "./schemas.js";
import type { z } from "zod";

/** An admin operation the audit trail records (`auditOperationSchema`, the one list of them). */
export type AuditOperation = z.infer<typeof auditOperationSchema>;

/** One entry of the audit trail as `admin.audit()` and `GET /api/v1/audit` answer it. */
export interface AuditEvent {
  id: string;
  /** ISO 8601 time of the operation. */
  timestamp: string;
  tenant_id: string | null;
  channel_id: string | null;
  /** The admin token's `sub` (`development` in development mode), the name given to `admin.as()`, `cli` for the command, `service` by default. */
  actor: string | null;
  /** `http` through the admin routes, `service` through `service.admin` (the command included). */
  via: "http" | "service";
  operation: AuditOperation;
  /**
   * What changed, by channel field (`allowed_origins`, `config.require_signature`, `api_key_hint`, `settings`, ...): never a key or
   * a secret. A secret setting of a plugin's type is recorded by its name, `settings.<name>: { from: "none" | "previous", to: "new" | "none" }`.
   */
  changes: Record<string, { from: unknown; to: unknown }>;
  outcome: "success" | "failure";
  /** The error code of a refused operation. */
  error_code: string | null;
}

/** A page of the audit trail, newest first; pass `next_cursor` back as `cursor` for the next page. */
export interface AuditPage {
  events: AuditEvent[];
  next_cursor: string | null;
}

/** The fields of a channel view whose changes are recorded: everything but ids and times. */
const AUDITED_FIELDS = [
  "name",
  "type",
  "mode",
  "environment",
  "state",
  "flow",
  "api_key_hint",
  "has_signing_secret",
  "config.require_signature",
  "allowed_origins",
  "default_stream",
  "languages",
  "widget",
  // A plugin type's settings that are not secrets; its secrets are recorded by name only (`settings.<name>`, by the operation).
  "settings",
] as const;

function field(view: ChannelView, name: (typeof AUDITED_FIELDS)[number]): unknown {
  if (name === "config.require_signature") return view.config.require_signature;
  if (name === "languages") return view.type === "webhook" ? view.languages : undefined;
  return view[name];
}

/** The audited fields that differ between two views of a channel (`before` null for a new channel). */
export function channelChanges(before: ChannelView | null, after: ChannelView): AuditEventRecord["changes"] {
  const changes: AuditEventRecord["changes"] = {};
  for (const name of AUDITED_FIELDS) {
    const from = before === null ? null : (field(before, name) ?? null);
    const to = field(after, name) ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[name] = { from, to };
  }
  return changes;
}

let lastMs = -1;
let sequence = 0;

/**
 * A UUIDv7 (RFC 9562) for an event at `ms`, with a 12-bit sequence in `rand_a` (the RFC's
 * method 1): ids made by one process sort in the order they were made, even within one
 * millisecond, so the trail's (timestamp, id) order is the order of the operations.
 */
export function auditEventId(ms: number): string {
  if (ms > lastMs) {
    lastMs = ms;
    sequence = 0;
  } else if (sequence < 0xfff) {
    sequence++;
  } else {
    // 4096 ids in one millisecond: borrow the next one, as the RFC allows.
    lastMs++;
    sequence = 0;
  }
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let time = lastMs;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = time % 256;
    time = Math.floor(time / 256);
  }
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | ((bytes[8] as number) & 0x3f);
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The JSON shape of a stored event. */
export function auditView(event: AuditEventRecord): AuditEvent {
  return {
    id: event.id,
    timestamp: event.timestamp,
    tenant_id: event.tenantId,
    channel_id: event.channelId,
    actor: event.actor,
    via: event.via,
    operation: event.operation as AuditOperation,
    changes: event.changes,
    outcome: event.outcome,
    error_code: event.errorCode,
  };
}

/** The opaque cursor after `event`: its timestamp and id, the order of the trail. */
export function auditCursor(event: AuditEventRecord): string {
  return toBase64Url(utf8(`${event.timestamp}|${event.id}`));
}

/** The position a cursor names; a cursor this service did not issue is a `validation_error`. */
export function parseAuditCursor(cursor: string): NonNullable<AuditQuery["before"]> {
  let text = "";
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(fromBase64Url(cursor));
  } catch {
    // Falls through to the refusal below.
  }
  const [timestamp, id, extra] = text.split("|");
  if (!timestamp || !id || extra !== undefined || Number.isNaN(Date.parse(timestamp))) {
    throw new ServiceError("validation_error", "cursor is not a cursor this service issued (use next_cursor of the previous page)", {
      details: [{ path: "cursor", message: "unknown cursor" }],
    });
  }
  return { timestamp, id };
}

/** The messages and runs `deleted` held, as audit changes (`{ from: n, to: 0 }`). */
export function countChanges(deleted: DeletedConversation[]): { messages: { from: number; to: number }; runs: { from: number; to: number } } {
  let messages = 0;
  let runs = 0;
  for (const conversation of deleted) {
    messages += conversation.messages;
    runs += conversation.runs;
  }
  return { messages: { from: messages, to: 0 }, runs: { from: runs, to: 0 } };
}
