import type { ApiKeyRecord, AuditEventRecord, ChannelRecord, ConversationRecord, Environment, MessageRecord, NewMessage, RunRecord } from "@channelkit/core";
import type { Insertable, Selectable } from "kysely";
import type { ApiKeysTable, AuditEventsTable, ChannelsTable, ConversationsTable, MessagesTable, RunsTable } from "./schema.js";

/** JSON text of a value; `undefined` is stored as null. */
export function toJson(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}

function fromJson<T>(text: string | null, fallback: T): T {
  return text === null ? fallback : (JSON.parse(text) as T);
}

export function channelToRow(channel: ChannelRecord): Insertable<ChannelsTable> {
  return {
    id: channel.id,
    tenant_id: channel.tenantId,
    name: channel.name,
    type: channel.type,
    mode: channel.mode,
    environment: channel.environment,
    state: channel.state,
    flow_name: channel.flowName,
    allowed_origins: JSON.stringify(channel.allowedOrigins),
    default_stream: channel.defaultStream ? 1 : 0,
    require_signature: channel.requireSignature ? 1 : 0,
    signing_secret_encrypted: channel.signingSecretEncrypted,
    api_key_hint: channel.apiKeyHint,
    client_id: channel.clientId,
    languages: JSON.stringify(channel.languages),
    livechat_messages: JSON.stringify(channel.livechatMessages),
    widget: JSON.stringify(channel.widget),
    livechat_wait_timeout_seconds: channel.livechatWaitTimeoutSeconds ?? null,
    run_timeout_seconds: channel.runTimeoutSeconds ?? null,
    rate_limits: channel.rateLimits ? JSON.stringify(channel.rateLimits) : null,
    resumable_streams: channel.resumableStreams ? 1 : 0,
    // A record made before plugin types existed has neither: none.
    settings: JSON.stringify(channel.settings ?? {}),
    sealed_settings: channel.sealedSettings ?? null,
    retention_days: channel.retentionDays ?? null,
    created_at: channel.createdAt,
    updated_at: channel.updatedAt,
  };
}

export function rowToChannel(row: Selectable<ChannelsTable>): ChannelRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    type: row.type as ChannelRecord["type"],
    mode: row.mode as ChannelRecord["mode"],
    environment: row.environment as Environment,
    state: row.state as ChannelRecord["state"],
    flowName: row.flow_name,
    allowedOrigins: fromJson(row.allowed_origins, []),
    defaultStream: Number(row.default_stream) === 1,
    requireSignature: Number(row.require_signature) === 1,
    signingSecretEncrypted: row.signing_secret_encrypted,
    apiKeyHint: row.api_key_hint,
    clientId: row.client_id,
    languages: fromJson(row.languages, []),
    livechatMessages: fromJson(row.livechat_messages, {}),
    widget: fromJson(row.widget, {}),
    livechatWaitTimeoutSeconds: row.livechat_wait_timeout_seconds === null ? null : Number(row.livechat_wait_timeout_seconds),
    runTimeoutSeconds: row.run_timeout_seconds === null || row.run_timeout_seconds === undefined ? null : Number(row.run_timeout_seconds),
    rateLimits: fromJson(row.rate_limits ?? null, null),
    resumableStreams: Number(row.resumable_streams) === 1,
    settings: fromJson(row.settings ?? null, {}),
    sealedSettings: row.sealed_settings ?? null,
    // Absent unless set, as on a record written without it.
    ...(row.retention_days === null || row.retention_days === undefined ? {} : { retentionDays: Number(row.retention_days) }),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function keyToRow(key: ApiKeyRecord): ApiKeysTable {
  return {
    id: key.id,
    channel_id: key.channelId,
    tenant_id: key.tenantId,
    hash: key.hash,
    prefix: key.prefix,
    environment: key.environment,
    hint: key.hint,
    created_at: key.createdAt,
    expires_at: key.expiresAt,
    revoked_at: key.revokedAt,
  };
}

export function rowToConversation(row: Selectable<ConversationsTable>): ConversationRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    channelId: row.channel_id,
    mode: row.mode as ConversationRecord["mode"],
    modeSince: row.mode_since ?? row.created_at,
    flowState: fromJson(row.flow_state, undefined),
    nextTurn: Number(row.next_turn),
    livechatConversationId: row.livechat_conversation_id,
    language: row.language,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function messageToRow(conversationId: string, turnIndex: number, message: NewMessage): MessagesTable {
  return {
    conversation_id: conversationId,
    turn_index: turnIndex,
    origin: message.origin,
    role: message.role,
    content: message.content,
    timestamp: message.timestamp,
    token_count: message.tokenCount,
    run_id: message.runId,
    step_id: message.stepId,
    node_type: message.nodeType,
    tool_calls: message.toolCalls === null ? null : JSON.stringify(message.toolCalls),
    tool_call_id: message.toolCallId,
    livechat_message_id: message.livechatMessageId,
    sender: message.sender,
    metadata: message.metadata === null ? null : JSON.stringify(message.metadata),
  };
}

export function rowToMessage(row: Selectable<MessagesTable>): MessageRecord {
  return {
    conversationId: row.conversation_id,
    turnIndex: Number(row.turn_index),
    origin: row.origin as MessageRecord["origin"],
    role: row.role as MessageRecord["role"],
    content: row.content,
    timestamp: row.timestamp,
    tokenCount: Number(row.token_count),
    runId: row.run_id,
    stepId: row.step_id,
    nodeType: row.node_type,
    toolCalls: fromJson(row.tool_calls, null),
    toolCallId: row.tool_call_id,
    livechatMessageId: row.livechat_message_id,
    sender: row.sender,
    metadata: fromJson(row.metadata, null),
  };
}

/** A run's row; `stream` when its stream is recorded, with its last events once it ends. */
export function runToRow(run: RunRecord, ticket: number | null, stream?: { aliveUntil: string; tail?: string }): RunsTable {
  return {
    id: run.id,
    conversation_id: run.conversationId,
    channel_id: run.channelId,
    tenant_id: run.tenantId,
    status: run.status,
    flow_name: run.flowName,
    flow_version: run.flowVersion,
    result: toJson(run.result),
    error: run.error,
    execution_order: JSON.stringify(run.executionOrder),
    started_at: run.startedAt,
    completed_at: run.completedAt,
    duration_ms: run.durationMs,
    ticket,
    stream_alive_until: stream?.aliveUntil ?? null,
    stream_renewed: null,
    stream_cancel_requested_at: null,
    stream_tail: stream?.tail ?? null,
    stream_followed: null,
  };
}

export function rowToRun(row: Selectable<RunsTable>): RunRecord {
  return {
    id: row.id,
    conversationId: row.conversation_id,
    channelId: row.channel_id,
    tenantId: row.tenant_id,
    status: row.status as RunRecord["status"],
    flowName: row.flow_name,
    flowVersion: row.flow_version,
    result: fromJson(row.result, null),
    error: row.error,
    executionOrder: fromJson(row.execution_order, []),
    startedAt: row.started_at,
    completedAt: row.completed_at,
    durationMs: Number(row.duration_ms),
  };
}

export function auditToRow(event: AuditEventRecord): AuditEventsTable {
  return {
    id: event.id,
    timestamp: event.timestamp,
    tenant_id: event.tenantId,
    channel_id: event.channelId,
    actor: event.actor,
    via: event.via,
    operation: event.operation,
    changes: JSON.stringify(event.changes),
    outcome: event.outcome,
    error_code: event.errorCode,
  };
}

export function rowToAudit(row: Selectable<AuditEventsTable>): AuditEventRecord {
  return {
    id: row.id,
    timestamp: row.timestamp,
    tenantId: row.tenant_id,
    channelId: row.channel_id,
    actor: row.actor,
    via: row.via as AuditEventRecord["via"],
    operation: row.operation,
    changes: JSON.parse(row.changes),
    outcome: row.outcome as AuditEventRecord["outcome"],
    errorCode: row.error_code,
  };
}
