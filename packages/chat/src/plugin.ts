import { type ChannelPlugin, definePlugin, defineRoute, type IncomingRequest, ServiceError, type ServiceContext } from "@channelkit/core";
import { Bots, PLUGIN_ID } from "./bots.js";
import { DeliveryClaims } from "./claims.js";
import { postHumanMessage, rememberThread } from "./handover.js";
import { type ChatPlatform, PLATFORMS } from "./platforms/index.js";

/** Where a chat channel's platform delivers its events. */
export const CHAT_WEBHOOK_PATH = "/channels/chat/:channel_id";

/** Options of {@link chatChannels}. */
export interface ChatChannelsOptions {
  /** The platforms served (their channel types registered): all of `PLATFORMS` by default. */
  platforms?: readonly ChatPlatform[];
}

/**
 * Chat platforms as channels, through the Chat SDK's adapters: a channel of a platform's
 * type (`telegram`, ...) holds that platform's credentials in its settings, sealed at rest,
 * and its platform delivers to `POST /channels/chat/{channel_id}`. Each platform thread is a
 * conversation; its messages are answered one after another, in order, across instances,
 * and a platform's retried delivery is answered once.
 *
 * @example
 * createChannelService({ storage, flows, plugins: [chatChannels()] });
 */
export function chatChannels(options: ChatChannelsOptions = {}): ChannelPlugin {
  const platforms = options.platforms ?? PLATFORMS;
  const bots = new Bots(platforms);
  const tag = { name: "Chat platforms", description: "Deliveries of the chat platforms' channels (`@channelkit/chat`)." };
  const parameters = [{ name: "channel_id", in: "path" as const, required: true, description: "The chat channel's id." }];
  return definePlugin({
    id: PLUGIN_ID,
    // Creating a channel answers the address to give its platform; its key reads its conversations' history.
    channelTypes: platforms.map((platform) => ({ ...platform.channelType, endpoint: "/channels/chat/{channel_id}", history: true })),
    errorCodes: {
      delivery_not_verified: {
        status: 401,
        message: "The delivery is not signed as the channel's platform signs it, with the channel's secret: nothing was run or stored.",
      },
      delivery_failed: {
        status: 503,
        message: "A message of this delivery could not be run, and the delivery was not kept as received: the platform sends it again, and it runs then.",
      },
    },
    routes: [
      defineRoute({
        method: "POST",
        path: CHAT_WEBHOOK_PATH,
        auth: "none",
        doc: {
          operationId: "chatWebhook",
          summary: "A chat platform's delivery",
          description:
            "The platform of a chat channel delivers its events here, signed as the platform does it (Slack: `X-Slack-Signature` v0 with `X-Slack-Request-Timestamp`; Teams: the Bot Framework's bearer token; Telegram: `X-Telegram-Bot-Api-Secret-Token`; WhatsApp: `X-Hub-Signature-256`; Discord: `X-Signature-Ed25519` for interactions, `X-Discord-Gateway-Token` for Gateway events forwarded by the host; Google Chat: Google's bearer token); the Chat SDK's adapter checks it (401 when it is wrong) and answers as the platform expects. A channel that is inactive or archived answers 200 and runs nothing, so that the platform stops retrying. A delivery whose message cannot be run (the channel's flow is not registered on this instance, the store fails) answers 503 and is not kept as received: the platform's retry runs it.",
          tag,
          parameters,
          responses: { 200: { description: "The delivery was taken (its messages are answered in the thread)." } },
          errors: [
            "channel_not_found",
            "channel_settings_unavailable",
            "payload_too_large",
            "rate_limited",
            "delivery_not_verified",
            "delivery_failed",
            "conversation_busy",
            "service_draining",
          ],
        },
        async handle(call, ctx) {
          return deliver(ctx, bots, call.request, call.params.channel_id, await call.rawBody());
        },
      }),
      defineRoute({
        method: "GET",
        path: CHAT_WEBHOOK_PATH,
        auth: "none",
        doc: {
          operationId: "chatWebhookVerification",
          summary: "A chat platform's check of the webhook",
          description:
            "A platform that verifies its webhook with a GET (WhatsApp: `hub.mode=subscribe`, `hub.verify_token`, `hub.challenge`) is answered by the channel's adapter: the challenge when the token is the channel's, 403 otherwise.",
          tag,
          parameters,
          responses: { 200: { description: "The platform's challenge, echoed." } },
          errors: ["channel_not_found", "channel_settings_unavailable", "rate_limited"],
        },
        handle(call, ctx) {
          return deliver(ctx, bots, call.request, call.params.channel_id, null);
        },
      }),
    ],
    hooks: {
      runEnded: (event, ctx) => rememberThread(bots, event, ctx),
      agentMessage: (event, ctx) => postHumanMessage(bots, event, ctx),
    },
    close: () => bots.close(),
  });
}

/**
 * Hands a platform's request to its channel's adapter, as a Web `Request` with the bytes
 * received (the signature is over them). The delivery's handlers resolve once their runs took
 * their turns (see answer()): the platform hears back then, so its next delivery's run
 * comes after.
 */
async function deliver(ctx: ServiceContext, bots: Bots, request: IncomingRequest, channelId: string, body: Uint8Array | null): Promise<Response> {
  const channel = await ctx.storage.findChannel(channelId);
  const platform = channel ? bots.platformOf(channel) : undefined;
  if (!channel || !platform) throw await ctx.limits.failedAuthentication(request, new ServiceError("channel_not_found", "No chat channel has this id."));
  // A 200 the platform does not retry; nothing runs.
  if (channel.state !== "active") return Response.json({ ignored: channel.state });
  await ctx.limits.forChannel(request, channel);
  const chat = await bots.of(ctx, channel, platform);
  const headers = new Headers();
  request.headers.forEach((value, name) => {
    headers.set(name, value);
  });
  const delivery = new Request(request.url, { method: request.method, headers, ...(body === null ? {} : { body: body as BodyInit }) });
  const webhook = chat.webhooks[platform.name as keyof typeof chat.webhooks] as (request: Request, options: object) => Promise<Response>;
  const tasks: Promise<unknown>[] = [];
  const claims = new DeliveryClaims();
  const answered = await claims.run(() => webhook(delivery, { waitUntil: (task: Promise<unknown>) => void tasks.push(task), propagateHandlerErrors: true }));
  if (answered.status === 401) {
    // Counted as a failed authentication (rate-limited past the limit), and said once in the log.
    ctx.logger.warn(`channelkit chat: a delivery to ${platform.name} channel ${channel.id} was refused: it is not signed with the channel's secret`);
    throw await ctx.limits.failedAuthentication(request, new ServiceError("delivery_not_verified"));
  }
  const failures = (await Promise.allSettled(tasks)).flatMap((settled) => (settled.status === "rejected" ? [settled.reason as unknown] : []));
  if (failures.length === 0) return answered;
  for (const failure of failures) ctx.logger.error(`channelkit chat: a message delivered to channel ${channel.id} could not be run`, failure);
  // Nothing of the delivery is kept as seen: the platform sends it again, and it runs then.
  await claims.release(ctx.storage.pluginStore(PLUGIN_ID));
  const [first] = failures;
  throw first instanceof ServiceError && (first.status >= 500 || first.status === 429) ? first : new ServiceError("delivery_failed");
}
