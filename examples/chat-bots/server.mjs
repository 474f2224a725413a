// One flow on Telegram and Slack at once, with @channelkit/chat, on embedded SQLite.
//   CHANNELKIT_DB           SQLite file (default ./chat-bots.db)
//   CHANNELKIT_SECRET_KEY   the master key that seals the bots' tokens at rest
//   PUBLIC_URL              the address the platforms reach this server at (a tunnel's https
//                           URL); default the local one
//   TELEGRAM_BOT_TOKEN, TELEGRAM_SECRET_TOKEN, TELEGRAM_API_URL (optional)
//   SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_API_URL (optional)
//                           a platform whose two first variables are set gets its channel
//   PORT, HOST              where to listen (default 3000 on 127.0.0.1)
import { createChannelService, defineFlow, step, text } from "@channelkit/core";
import { chatChannels } from "@channelkit/chat";
import { sqlite } from "@channelkit/kysely";
import { serve } from "@channelkit/node";

/**
 * Answers a message reversed, and counts the messages of its conversation from the history:
 * each Telegram chat and each Slack conversation (a direct message, a channel thread) is a
 * conversation of its own, so each counts from 1.
 */
const reverse = defineFlow({
  name: "reverse",
  version: "1",
  async *run(ctx) {
    yield step("reverse");
    // A chat a bot keeps answering for months would keep its count with setState instead.
    const earlier = (await ctx.history(1000)).filter((message) => message.role === "user");
    const said = earlier.length === 0 ? "" : ` Before it you said: ${earlier.at(-1).content}`;
    yield text(`${[...ctx.payload].reverse().join("")}\nMessage ${earlier.length + 1} on ${ctx.metadata.platform}.${said}`);
    return { messages: earlier.length + 1 };
  },
});

const plugins = [chatChannels()];
const storage = sqlite(process.env.CHANNELKIT_DB ?? "./chat-bots.db");
// The plugin's tables (the Chat SDK's state in channelkit's plugin store) with channelkit's.
await storage.migrate({ plugins });
const service = await createChannelService({ storage, flows: [reverse], plugins, secretKey: process.env.CHANNELKIT_SECRET_KEY });

const server = await serve(service, { port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? "127.0.0.1" });
await provision((process.env.PUBLIC_URL ?? server.url).replace(/\/+$/, ""));
console.log(`listening on ${server.url}`);

/**
 * The example's tenant, and a channel per platform whose variables are set, bound to
 * `reverse`: created on the first start, found by name on the next ones and given the
 * variables' values again (a token changed in the environment is the channel's on restart).
 */
async function provision(baseUrl) {
  const admin = service.admin.as("chat-bots-example");
  const tenant =
    (await admin.listTenants()).tenants.find((candidate) => candidate.name === "Chat bots") ?? (await admin.createTenant({ name: "Chat bots" })).tenant;
  const { channels } = await admin.listChannels({ tenantId: tenant.id });
  const platforms = [
    {
      type: "telegram",
      name: "Telegram bot",
      needs: ["TELEGRAM_BOT_TOKEN", "TELEGRAM_SECRET_TOKEN"],
      settings: () => ({
        bot_token: process.env.TELEGRAM_BOT_TOKEN,
        secret_token: process.env.TELEGRAM_SECRET_TOKEN,
        api_url: process.env.TELEGRAM_API_URL,
      }),
      instructions: (url) => {
        const api = (process.env.TELEGRAM_API_URL || "https://api.telegram.org").replace(/\/+$/, "");
        return [
          "  Register it as the bot's webhook, with the same secret token (Telegram wants an https URL):",
          `  curl -s "${api}/bot$TELEGRAM_BOT_TOKEN/setWebhook" -d "url=${url}" -d "secret_token=$TELEGRAM_SECRET_TOKEN"`,
        ];
      },
    },
    {
      type: "slack",
      name: "Slack bot",
      needs: ["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"],
      settings: () => ({
        bot_token: process.env.SLACK_BOT_TOKEN,
        signing_secret: process.env.SLACK_SIGNING_SECRET,
        api_url: process.env.SLACK_API_URL,
      }),
      instructions: (url) => [
        "  In your Slack app's settings, Event Subscriptions: turn on Enable Events and give it as the Request URL:",
        `  ${url}`,
        "  then subscribe to the bot events message.im, app_mention and message.channels.",
      ],
    },
  ];
  for (const platform of platforms) {
    const missing = platform.needs.filter((name) => !process.env[name]);
    if (missing.length > 0) {
      console.log(`${platform.name}: not set up (set ${missing.join(" and ")}).`);
      continue;
    }
    const existing = channels.find((channel) => channel.name === platform.name && channel.type === platform.type && channel.state !== "archived");
    const settings = platform.settings();
    let channelId;
    if (existing) {
      // An update takes null for a setting to remove (an api_url set by an earlier start).
      await admin.updateChannel(existing.id, { settings: { ...settings, api_url: settings.api_url || null } });
      channelId = existing.id;
    } else {
      if (!settings.api_url) delete settings.api_url;
      const created = await admin.createChannel({ tenantId: tenant.id, flow: "reverse", name: platform.name, type: platform.type, settings });
      channelId = created.channel.id;
    }
    const url = `${baseUrl}/channels/chat/${channelId}`;
    console.log(`${platform.name} (channel ${channelId}): ${platform.type} webhook ${url}`);
    for (const line of platform.instructions(url)) console.log(line);
  }
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    const closed = server.close();
    await service.close(); // waits for replies being posted
    await closed;
    process.exit(0);
  });
}
