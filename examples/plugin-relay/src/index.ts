/**
 * A channel plugin for "relay", a small chat platform: the platform POSTs each user message
 * to `POST /channels/relay/:channel_id` with the channel's token, the plugin runs the
 * channel's flow in the conversation of the message's thread, and posts the reply back to the
 * channel's `callback_url`. docs/plugins.md walks through this file, in this order.
 */
import {
  type ChannelRecord,
  channelFlow,
  channelSettings,
  defineChannelType,
  definePlugin,
  defineRoute,
  externalConversationId,
  type IncomingRequest,
  json,
  type RunEndedEvent,
  type RunOutcome,
  runToEnd,
  type ServiceContext,
  ServiceError,
  sha256Hex,
  userText,
} from "@channelkit/core";
import { pluginDatabase, pluginSchema } from "@channelkit/kysely";
import type { Kysely } from "kysely";
import { z } from "zod";

/** A relay channel's settings: where replies go, and the token both sides send, sealed at rest. */
export const relayChannelType = defineChannelType({
  name: "relay",
  description: "A relay chat platform's bot: the platform delivers messages to the plugin's route, replies are posted to `callback_url`.",
  settings: z.object({
    callback_url: z.url(),
    token: z.string().min(16),
  }),
  secrets: ["token"],
});

/** The plugin's error codes, added to the service's table: `new ServiceError("relay_token_invalid")` answers 401. */
const errorCodes = {
  relay_token_invalid: { status: 401, message: "The X-Relay-Token header is missing or is not this channel's token." },
};

/** A delivery as the plugin's table records it. */
export interface RelayDelivery {
  channel_id: string;
  update_id: number;
  thread_id: string;
  conversation_id: string;
  user_id: string;
  received_at: string;
}

/** The plugin's table, created by `storage.migrate({ plugins })` after channelkit's own. */
const schema = pluginSchema({
  "0001_relay_deliveries": {
    async up(db) {
      await db.schema
        .createTable("relay_deliveries")
        .addColumn("channel_id", "text", (c) => c.notNull())
        .addColumn("update_id", "bigint", (c) => c.notNull())
        .addColumn("thread_id", "text", (c) => c.notNull())
        .addColumn("conversation_id", "text", (c) => c.notNull())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("received_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("relay_deliveries_pk", ["channel_id", "update_id"])
        .execute();
      await db.schema.createIndex("relay_deliveries_conversation").on("relay_deliveries").column("conversation_id").execute();
    },
    async down(db) {
      await db.schema.dropTable("relay_deliveries").execute();
    },
  },
});

/** The plugin's table, on the service's own database connection. */
function deliveries(ctx: ServiceContext): Kysely<{ relay_deliveries: RelayDelivery }> {
  return pluginDatabase<{ relay_deliveries: RelayDelivery }>(ctx.storage);
}

/** What the platform delivers: one user message of a thread. */
export const relayUpdateSchema = z.object({
  update_id: z.int().min(0).describe("The delivery's id: a delivery sent again (the platform's retry) has the same one."),
  thread_id: z.string().min(1).max(255).describe("The platform's thread: its messages are one conversation."),
  user_id: z.string().min(1).max(255).describe("Who wrote the message on the platform."),
  text: userText("text").describe("The message."),
});

type RelayUpdate = z.infer<typeof relayUpdateSchema>;

/** What the route answers: the run, a delivery already handled, or a channel that takes none. */
const relayAnswerSchema = z.union([
  z.object({ conversation_id: z.string(), run_id: z.string(), status: z.enum(["success", "error", "pending", "cancelled"]) }),
  z.object({ duplicate: z.literal(true) }),
  z.object({ ignored: z.enum(["inactive", "archived"]) }),
]);

/**
 * The relay channel `channelId` if the request carries its token: 404 `channel_not_found`
 * for a channel that is not a relay channel, 401 `relay_token_invalid` for a wrong token, both
 * counted as failed authentications of the caller's address (429 once it fails too often).
 */
async function authenticate(request: IncomingRequest, channelId: string, ctx: ServiceContext): Promise<ChannelRecord> {
  const channel = await ctx.storage.findChannel(channelId);
  if (!channel || channel.type !== relayChannelType.name) {
    throw await ctx.limits.failedAuthentication(request, new ServiceError("channel_not_found", "No relay channel has this id."));
  }
  const { token } = await channelSettings(ctx, channel, relayChannelType);
  const sent = request.headers.get("x-relay-token");
  // Digests compared, not the tokens: how long the comparison takes tells nothing of the token.
  if (sent === null || (await sha256Hex(sent)) !== (await sha256Hex(token))) {
    throw await ctx.limits.failedAuthentication(request, new ServiceError("relay_token_invalid"));
  }
  // Counted once the sender is known: per channel and per client address, 429 over a limit.
  await ctx.limits.forChannel(request, channel);
  return channel;
}

/** How long the plugin store remembers a delivery: longer than the platform retries one. */
const REMEMBER_MS = 24 * 60 * 60 * 1000;

/**
 * Takes the delivery for this request: true for the first caller of any instance, false for
 * a delivery already taken (the platform's retry). Records it in the plugin's table.
 */
async function claim(ctx: ServiceContext, channel: ChannelRecord, update: RelayUpdate): Promise<boolean> {
  const store = ctx.storage.pluginStore("relay");
  if (!(await store.add(`update:${channel.id}:${update.update_id}`, true, { ttlMs: REMEMBER_MS }))) return false;
  const recorded = await deliveries(ctx)
    .insertInto("relay_deliveries")
    .values({
      channel_id: channel.id,
      update_id: update.update_id,
      thread_id: update.thread_id,
      conversation_id: await externalConversationId(channel, update.thread_id),
      user_id: update.user_id,
      received_at: new Date().toISOString(),
    })
    // The table's key catches a delivery sent again after the store forgot it.
    .onConflict((oc) => oc.columns(["channel_id", "update_id"]).doNothing())
    .returning("update_id")
    .execute();
  return recorded.length > 0;
}

/** Gives a delivery back, so that the platform's retry runs it. */
async function giveBack(ctx: ServiceContext, channel: ChannelRecord, update: RelayUpdate): Promise<void> {
  await deliveries(ctx).deleteFrom("relay_deliveries").where("channel_id", "=", channel.id).where("update_id", "=", update.update_id).execute();
  await ctx.storage.pluginStore("relay").delete(`update:${channel.id}:${update.update_id}`);
}

/** `POST /channels/relay/:channel_id`: the platform delivers a user's message. */
const deliver = defineRoute({
  method: "POST",
  path: "/channels/relay/:channel_id",
  auth: { schemes: { relayToken: { type: "apiKey", in: "header", name: "X-Relay-Token" } } },
  body: relayUpdateSchema,
  doc: {
    operationId: "relayDeliver",
    summary: "Deliver a relay message",
    description:
      "The relay platform delivers a user's message to the channel: the channel's flow runs in the conversation of the message's thread, and its reply is posted to the channel's `callback_url` as `{ thread_id, text }`. A delivery sent again with the same `update_id` runs nothing (`{ duplicate: true }`); a channel that is inactive or archived answers 200 and runs nothing, so that the platform stops retrying.",
    tag: { name: "Relay", description: "The relay chat platform's deliveries (the relay plugin, examples/plugin-relay)." },
    parameters: [{ name: "channel_id", in: "path", required: true, description: "The relay channel's id." }],
    responses: { 200: { description: "The run, or a delivery that ran nothing.", json: relayAnswerSchema } },
    errors: [
      "channel_not_found",
      "relay_token_invalid",
      "channel_settings_unavailable",
      "unsupported_media_type",
      "payload_too_large",
      "bad_request",
      "validation_error",
      "flow_unavailable",
      "conversation_busy",
      "rate_limited",
      "runtime_error",
    ],
  },
  async handle(call, ctx) {
    const channel = await authenticate(call.request, call.params.channel_id, ctx);
    // A channel that takes no message: a 200, which the platform does not retry.
    if (channel.state !== "active") return json({ ignored: channel.state });
    const update = await call.body();
    if (!(await claim(ctx, channel, update))) return json({ duplicate: true });
    try {
      const run = await ctx.runs.start({
        channel,
        flow: channelFlow(ctx, channel),
        // The thread's conversation: created by its first message, continued by the next ones.
        conversation: { externalKey: update.thread_id },
        payload: update.text,
        metadata: { relay_user_id: update.user_id },
        // The run goes on if the platform hangs up: its retry would find the delivery taken.
        request: null,
        live: false,
      });
      const outcome = await runToEnd(run);
      // The reply goes to the platform from the runEnded hook.
      return json({ conversation_id: run.conversationId, run_id: run.runId, status: outcome.status });
    } catch (error) {
      // A run refused (the flow unavailable, the conversation busy) or a store failing: the
      // platform's retry runs the delivery again.
      await giveBack(ctx, channel, update);
      throw error;
    }
  },
});

/** The text of a run's replies, as the platform shows it: the flow's messages, one paragraph each. */
function replyText(outcome: RunOutcome): string {
  return outcome.produced
    .filter((message) => message.role === "assistant" && message.content !== "")
    .map((message) => message.content)
    .join("\n\n");
}

/** Posts the reply of a relay channel's run to the channel's `callback_url`, in the thread of its conversation. */
async function postReply(ctx: ServiceContext, { channel, conversationId }: RunEndedEvent, text: string): Promise<void> {
  const delivery = await deliveries(ctx)
    .selectFrom("relay_deliveries")
    .select("thread_id")
    .where("conversation_id", "=", conversationId)
    .limit(1)
    .executeTakeFirst();
  if (!delivery) {
    ctx.logger.warn(`relay: conversation ${conversationId} of channel ${channel.id} has no relay thread; its reply is not posted`);
    return;
  }
  const { callback_url, token } = await channelSettings(ctx, channel, relayChannelType);
  const response = await fetch(callback_url, {
    method: "POST",
    headers: { "content-type": "application/json", "x-relay-token": token },
    body: JSON.stringify({ thread_id: delivery.thread_id, text }),
    signal: AbortSignal.timeout(10_000),
  });
  await response.body?.cancel();
  if (!response.ok)
    ctx.logger.warn(`relay: the callback of channel ${channel.id} answered ${response.status}; a reply in conversation ${conversationId} is lost`);
}

/**
 * The relay channel plugin. Mount it with `createChannelService({ plugins: [relayChannel()] })`
 * on a SQL storage migrated with it (`storage.migrate({ plugins })`), and create its channels
 * with `service.admin.createChannel({ type: "relay", settings: { callback_url, token } })`.
 */
export function relayChannel() {
  return definePlugin({
    id: "relay",
    routes: [deliver],
    channelTypes: [relayChannelType],
    errorCodes,
    schema,
    hooks: {
      // A hook is given the service's context, as a route is.
      runEnded(event, ctx) {
        if (event.channel.type !== relayChannelType.name) return;
        const text = replyText(event.outcome);
        if (text === "") return;
        // service.close() waits until the reply is posted, before it closes the storage.
        const release = ctx.runs.hold();
        return postReply(ctx, event, text).finally(release);
      },
    },
  });
}
