import { A2A_VERSION_HEADER, formatSSEErrorEvent, formatSSEEvent, SSE_HEADERS } from "@a2a-js/sdk";
import {
  DefaultExecutionEventBusManager,
  DefaultRequestHandler,
  defaultServerCallContextBuilder,
  JsonRpcTransportHandler,
  type User,
  validateVersion,
} from "@a2a-js/sdk/server";
import {
  authenticateRequest,
  type ChannelRecord,
  type IncomingRequest,
  isServiceError,
  json,
  PushStream,
  type Reply,
  ServiceError,
  type ServiceContext,
} from "@channelkit/core";
import { agentCard, agentCardJson } from "./card.js";
import { FlowExecutor, type RunningTasks } from "./executor.js";
import { A2A_CHANNEL_TYPE } from "./settings.js";
import { PluginTaskStore } from "./task-store.js";

/** The plugin's id, and the namespace of its store (the tasks). */
export const A2A_PLUGIN_ID = "a2a";

/** JSON-RPC's generic server error: a refusal of channelkit's, the contract's code in `data.code`. */
export const SERVICE_ERROR_RPC_CODE = -32000;

/**
 * What the requests of one instance share: the SDK's event buses (a task's live events, for
 * `CancelTask` and `SubscribeToTask` of a task running here) and the runs in flight.
 */
export interface A2aInstance {
  buses: DefaultExecutionEventBusManager;
  running: RunningTasks;
}

/** A new instance's shared state. */
export function a2aInstance(): A2aInstance {
  return { buses: new DefaultExecutionEventBusManager(), running: new Map() };
}

/** The caller of a request: its channel, so that the SDK's buses are scoped per channel. */
class ChannelUser implements User {
  readonly #channelId: string;
  constructor(channelId: string) {
    this.#channelId = channelId;
  }
  get isAuthenticated(): boolean {
    return true;
  }
  get userName(): string {
    return `channel:${this.#channelId}`;
  }
}

/**
 * The SDK's handler, whose `CancelTask` of a task running on another instance stops its run
 * there: the SDK, which sees the buses of this instance only, then stores the task
 * `canceled`, as the run's own end does where it ran.
 */
class ChannelRequestHandler extends DefaultRequestHandler {
  stopElsewhere: (taskId: string) => Promise<void> = () => Promise.resolve();

  override async cancelTask(...args: Parameters<DefaultRequestHandler["cancelTask"]>): ReturnType<DefaultRequestHandler["cancelTask"]> {
    await this.stopElsewhere(args[0].id);
    return super.cancelTask(...args);
  }
}

/**
 * `POST /channels/a2a/{channel_id}`: one JSON-RPC request of A2A, answered by the SDK's
 * `JsonRpcTransportHandler` over a `DefaultRequestHandler` made for the channel (its card,
 * its flow as the executor, its tasks in the plugin's store). A streaming method is answered
 * as server-sent events, counted against the caps of open streams. The key is checked first:
 * a refusal is the contract's status with a JSON-RPC error whose `data.code` is the contract's.
 */
export async function handleRpc(
  request: IncomingRequest,
  channelId: string,
  ctx: ServiceContext,
  body: Uint8Array,
  instance: A2aInstance,
): Promise<Reply | Response> {
  try {
    const found = await authenticateRequest(request, ctx, { channelTypes: [A2A_CHANNEL_TYPE] });
    // Another A2A channel's key is no key of this one.
    if (found.channel.id !== channelId) throw new ServiceError("invalid_api_key", "This key is not the key of the channel in the path.");
    const channel = found.channel;
    const card = agentCard(channel, endpointOf(request, ctx, channel));
    const tasks = new PluginTaskStore(ctx.storage.pluginStore(A2A_PLUGIN_ID), channel.id);
    const executor = new FlowExecutor(ctx, channel, instance.running);
    // No bus is kept past its executor: a task waiting for input is continued by a new run.
    const handler = new ChannelRequestHandler(card, tasks, executor, instance.buses, undefined, undefined, undefined, undefined, { keepBusAliveStates: [] });
    handler.stopElsewhere = async (taskId) => {
      if (instance.running.has(taskId)) return;
      const runId = (await tasks.load(taskId))?.metadata?.channelkit_run_id;
      if (typeof runId === "string") await ctx.runs.cancel(runId, new DOMException("The task was cancelled (CancelTask).", "AbortError"));
    };
    const context = defaultServerCallContextBuilder({
      extensions: undefined,
      user: new ChannelUser(channel.id),
      headers: headersOf(request),
      requestedVersion: request.headers.get(A2A_VERSION_HEADER) ?? undefined,
    });
    const rpc = new TextDecoder().decode(body);
    try {
      validateVersion(context.requestedVersion, card, "JSONRPC");
      const answer = await new JsonRpcTransportHandler(handler).handle(rpc, context);
      if (!isStream(answer)) return Response.json(answer);
      return await ctx.openStreams.forKey(request, found, () => sse(answer, rpcIdOf(rpc)));
    } catch (error) {
      if (isServiceError(error)) throw error;
      // What the SDK refuses (a version it does not speak, a malformed request), as its transports answer it.
      return Response.json({ jsonrpc: "2.0", id: rpcIdOf(rpc), error: JsonRpcTransportHandler.mapToJSONRPCError(error) });
    }
  } catch (error) {
    if (!isServiceError(error)) throw error;
    return rpcError(await ctx.limits.afterRefusal(request, error));
  }
}

/**
 * `GET /channels/a2a/{channel_id}/.well-known/agent-card.json`: the channel's agent card,
 * public as the protocol wants it (it names the key it takes, not the key). 404 for a
 * channel that is not an active A2A channel.
 */
export async function handleCard(request: IncomingRequest, channelId: string, ctx: ServiceContext): Promise<Response> {
  const channel = await ctx.storage.findChannel(channelId);
  if (!channel || channel.type !== A2A_CHANNEL_TYPE || channel.state !== "active") {
    throw await ctx.limits.failedAuthentication(request, new ServiceError("channel_not_found", "No active A2A channel has this id."));
  }
  await ctx.limits.forChannel(request, channel);
  return Response.json(agentCardJson(channel, endpointOf(request, ctx, channel)), { headers: { "cache-control": "no-cache" } });
}

/** The channel's JSON-RPC endpoint, on the origin the request came to. */
function endpointOf(request: IncomingRequest, ctx: ServiceContext, channel: ChannelRecord): string {
  return `${new URL(request.url).origin}${ctx.basePath}/channels/a2a/${channel.id}`;
}

/** The streaming answer: the first response read before the status line, so that an error before it is a JSON answer. */
async function sse(stream: AsyncGenerator<unknown, void, undefined>, id: string | number | null): Promise<Reply> {
  const iterator = stream[Symbol.asyncIterator]();
  let first: IteratorResult<unknown, void>;
  try {
    first = await iterator.next();
  } catch (error) {
    return json({ jsonrpc: "2.0", id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) });
  }
  // The client leaving stops the stream, not the task: it runs on, for GetTask and SubscribeToTask.
  const out = new PushStream(() => void iterator.return(undefined));
  void (async () => {
    try {
      for (let next = first; !next.done && !out.ended; next = await iterator.next()) out.push(formatSSEEvent(next.value));
    } catch (error) {
      out.push(formatSSEErrorEvent({ jsonrpc: "2.0", id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) }));
    } finally {
      out.end();
    }
  })();
  return { status: 200, headers: { ...SSE_HEADERS }, body: out };
}

function isStream(answer: unknown): answer is AsyncGenerator<unknown, void, undefined> {
  return typeof (answer as { [Symbol.asyncIterator]?: unknown } | null)?.[Symbol.asyncIterator] === "function";
}

/** The id of the JSON-RPC request, for an error answered outside the SDK's handler. */
function rpcIdOf(rpc: string): string | number | null {
  try {
    const id = (JSON.parse(rpc) as { id?: unknown }).id;
    return typeof id === "string" || typeof id === "number" ? id : null;
  } catch {
    return null;
  }
}

function headersOf(request: IncomingRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return headers;
}

/** A refusal as a JSON-RPC error, with the contract's status, headers (`WWW-Authenticate`, `Retry-After`) and code. */
function rpcError(error: ServiceError): Response {
  const body = { jsonrpc: "2.0", id: null, error: { code: SERVICE_ERROR_RPC_CODE, message: error.message, data: { code: error.code } } };
  return Response.json(body, { status: error.status, headers: error.headers ?? {} });
}
