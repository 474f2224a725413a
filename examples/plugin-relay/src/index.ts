/**
 * A channel plugin for "relay", a small chat platform: the platform POSTs each user message
 * to `POST /channels/relay/:channel_id` with the channel's token, the plugin runs the
 * channel's flow in the conversation of the message's thread, and posts the reply back to the
 * channel's `callback_url`. Walked through step by step in docs/plugins.md.
 */
import {
  type ChannelRecord,
  channelFlow,
  channelSettings,
  defineChannelType,
  definePlugin,
  defineRoute,
  externalConversationId,
  json,
  type RunOutcome,
  runToEnd,
  type ServiceContext,
  ServiceError,
  sha256Hex,
  userText,
} from "@channelkit/core";
import { pluginDatabase } from "@channelkit/kysely";
import type { Kysely } from "kysely";
import { z } from "zod";

/** The plugin's id: its plugin store's namespace, the prefix of its migrations' names. */
export const RELAY_PLUGIN_ID = "relay";

/** A relay channel's settings: where replies go, and the token both sides send. The token is sealed at rest. */
export const relayChannelType = defineChannelType({
  name: "relay",
  description: "A relay chat platform's bot: the platform delivers messages to the plugin's route, replies are posted to `callback_url`.",
  settings: z.object({
    callback_url: z.url(),
    token: z.string().min(16),
  }),
  secrets: ["token"],
});

/** What the platform delivers: one user message of a thread. */
export const relayUpdateSchema = z.object({
  update_id: z.int().min(0).describe("The delivery's id: a delivery sent again (the platform's retry) has the same one."),
  thread_id: z.string().min(1).max(255).describe("The platform's thread: its messages are one conversation."),
  user_id: z.string().min(1).max(255).describe("Who wrote the message on the platform."),
  text: userText("text").describe("The message."),
});

/** What the route answers: the run, a delivery already handled, or a channel that takes none. */
const relayAnswerSchema = z.union([
  z.object({ conversation_id: z.string(), run_id: z.string(), status: z.enum(["success", "error", "pending", "cancelled"]) }),
  z.object({ duplicate: z.literal(true) }),
  z.object({ ignored: z.enum(["inactive", "archived"]) }),
]);

/** A delivery as the plugin's table records it. */
export interface RelayDelivery {
  channel_id: string;
  update_id: number;
  thread_id: string;
  conversation_id: string;
  user_id: string;
  received_at: string;
}

/** The plugin's tables, for its queries on `pluginDatabase(ctx.storage)`. */
interface RelayTables {
  relay_deliveries: RelayDelivery;
}

/** How long the plugin store remembers a delivery: longer than the platform retries one. */
const REMEMBER_MS = 24 * 60 * 60 * 1000;

/** How long the platform has to take a reply. */
const CALLBACK_TIMEOUT_MS = 10_000;

/** The plugin's tables on the service's database. */
function database(ctx: ServiceContext): Kysely<RelayTables> {
  return pluginDatabase(ctx.storage) as Kysely<RelayTables>;
}

/** Whether the token sent is the channel's, compared as digests: the comparison's time tells nothing of the token. */
async function sameToken(sent: string | null, token: string): Promise<boolean> {
  return sent !== null && (await sha256Hex(sent)) === (await sha256Hex(token));
}

/** The text of a run's replies, as the platform shows it: the flow's messages, one paragraph each. */
function replyText(outcome: RunOutcome): string {
  return outcome.produced
    .filter((message) => message.role === "assistant" && message.content !== "")
    .map((message) => message.content)
    .join("\n\n");
}

/**
 * The relay channel plugin. Mount it with `createChannelService({ plugins: [relayChannel()] })`
 * on a SQL storage migrated with it (`storage.migrate({ plugins })`), and create its channels
 * with `service.admin.createChannel({ type: "relay", settings: { callback_url, token } })`.
 */
export function relayChannel() {
  // The hooks are told of a run, not given the service: `init` keeps it for them.
  let service: ServiceContext | undefined;

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
      const { request, params } = call;
      // 1. The channel, and its token: an unknown channel and a wrong token count as failed
      // authentications of the caller's address (429 once it fails too often).
      const channel = await ctx.storage.findChannel(params.channel_id);
      if (!channel || channel.type !== relayChannelType.name) {
        throw await ctx.limits.failedAuthentication(request, new ServiceError("channel_not_found", "No relay channel has this id."));
      }
      const settings = await channelSettings(ctx, channel, relayChannelType);
      if (!(await sameToken(request.headers.get("x-relay-token"), settings.token))) {
        throw await ctx.limits.failedAuthentication(request, new ServiceError("relay_token_invalid"));
      }
      // 2. A channel that takes no message: a 200, which the platform does not retry.
      if (channel.state !== "active") return json({ ignored: channel.state });
      const update = await call.body();

      // 3. Once per update_id, across instances: the first caller to add the key runs it.
      const store = ctx.storage.pluginStore(RELAY_PLUGIN_ID);
      const key = `update:${channel.id}:${update.update_id}`;
      if (!(await store.add(key, true, { ttlMs: REMEMBER_MS }))) return json({ duplicate: true });
      const delivery: RelayDelivery = {
        channel_id: channel.id,
        update_id: update.update_id,
        thread_id: update.thread_id,
        conversation_id: await externalConversationId(channel, update.thread_id),
        user_id: update.user_id,
        received_at: new Date().toISOString(),
      };
      const db = database(ctx);
      // The table's key catches a delivery sent again after the store forgot it.
      const recorded = await db
        .insertInto("relay_deliveries")
        .values(delivery)
        .onConflict((oc) => oc.columns(["channel_id", "update_id"]).doNothing())
        .returning("update_id")
        .execute();
      if (recorded.length === 0) return json({ duplicate: true });

      // 4. The flow, in the thread's conversation; the reply goes out through the runEnded hook.
      try {
        const run = await ctx.runs.start({
          channel,
          flow: channelFlow(ctx, channel),
          conversation: { externalKey: update.thread_id },
          payload: update.text,
          metadata: { relay_user_id: update.user_id, relay_thread_id: update.thread_id },
          // The run goes on if the platform hangs up: its retry would find the update taken.
          request: null,
          live: false,
        });
        const outcome = await runToEnd(run);
        return json({ conversation_id: run.conversationId, run_id: run.runId, status: outcome.status });
      } catch (error) {
        // Refused before the flow ran (the flow unavailable, the conversation busy): the
        // update is given back, and the platform's retry runs it.
        await db.deleteFrom("relay_deliveries").where("channel_id", "=", channel.id).where("update_id", "=", update.update_id).execute();
        await store.delete(key);
        throw error;
      }
    },
  });

  /** Posts the reply of a relay channel's run to the channel's `callback_url`, in the thread it answers. */
  async function postReply(ctx: ServiceContext, channel: ChannelRecord, conversationId: string, text: string): Promise<void> {
    const row = await database(ctx)
      .selectFrom("relay_deliveries")
      .select("thread_id")
      .where("conversation_id", "=", conversationId)
      .limit(1)
      .executeTakeFirst();
    if (!row) {
      ctx.logger.warn(`relay: conversation ${conversationId} of channel ${channel.id} has no relay thread; its reply is not posted`);
      return;
    }
    const { callback_url, token } = await channelSettings(ctx, channel, relayChannelType);
    const response = await fetch(callback_url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-relay-token": token },
      body: JSON.stringify({ thread_id: row.thread_id, text }),
      signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (!response.ok)
      ctx.logger.warn(`relay: the callback of channel ${channel.id} answered ${response.status}; the reply in conversation ${conversationId} is not posted`);
  }

  return definePlugin({
    id: RELAY_PLUGIN_ID,
    routes: [deliver],
    channelTypes: [relayChannelType],
    errorCodes: {
      relay_token_invalid: { status: 401, message: "The X-Relay-Token header is missing or is not this channel's token." },
    },
    schema: {
      migrations: {
        "0001_relay_deliveries": {
          async up(db) {
            const kysely = db as Kysely<any>;
            await kysely.schema
              .createTable("relay_deliveries")
              .addColumn("channel_id", "text", (c) => c.notNull())
              .addColumn("update_id", "bigint", (c) => c.notNull())
              .addColumn("thread_id", "text", (c) => c.notNull())
              .addColumn("conversation_id", "text", (c) => c.notNull())
              .addColumn("user_id", "text", (c) => c.notNull())
              .addColumn("received_at", "text", (c) => c.notNull())
              .addPrimaryKeyConstraint("relay_deliveries_pk", ["channel_id", "update_id"])
              .execute();
            await kysely.schema.createIndex("relay_deliveries_conversation").on("relay_deliveries").column("conversation_id").execute();
          },
          async down(db) {
            await (db as Kysely<any>).schema.dropTable("relay_deliveries").execute();
          },
        },
      },
    },
    hooks: {
      runEnded({ channel, conversationId, outcome }) {
        if (channel.type !== relayChannelType.name || service === undefined) return;
        const text = replyText(outcome);
        if (text === "") return;
        // service.close() waits for the reply to be posted before it closes the storage.
        const release = service.runs.hold();
        return postReply(service, channel, conversationId, text).finally(release);
      },
    },
    init(ctx) {
      service = ctx;
    },
  });
}
