// A support agent on @channelkit/ai: an AI SDK model with two tools, `lookupOrder` (a small
// local table) and `handover` (to a person, through channelkit's built-in live-chat inbox),
// served by node:http on embedded SQLite.
//   OPENAI_API_KEY          use OpenAI (model OPENAI_MODEL, default gpt-4.1-mini); unset, a
//                           mock model answers from a script, offline (mock-model.mjs)
//   CHANNELKIT_DB           SQLite file (default ./channelkit.db); on the first start, with no
//                           tenant yet, a tenant and a `support` channel are created and the
//                           channel's key printed once
//   CHANNELKIT_SECRET_KEY   the master key (use the same one as the `channelkit` command)
//   CHANNELKIT_ADMIN_JWT_SECRET  the secret of the agents' tokens for the inbox
//                           (`npx channelkit admin-token --tenant <id>` signs one)
//   PORT, HOST              where to listen (default 3000 on 127.0.0.1)
import { aiFlow, handoverTool } from "@channelkit/ai";
import { createChannelService, liveChatInbox } from "@channelkit/core";
import { sqlite } from "@channelkit/kysely";
import { serve } from "@channelkit/node";
import { tool } from "ai";
import { z } from "zod";

/** The shop's orders, by number: what `lookupOrder` reads. */
const orders = new Map([
  ["1041", { status: "being prepared", shipsBy: "2026-03-09" }],
  ["1042", { status: "shipped", carrier: "DHL", tracking: "JD014600003828", shippedOn: "2026-03-03", estimatedDelivery: "2026-03-06" }],
  ["1043", { status: "delivered", deliveredOn: "2026-02-27" }],
]);

const lookupOrder = tool({
  description: "Looks an order up by its number: its status, carrier, tracking number and dates.",
  inputSchema: z.object({ orderId: z.string().describe("The order number, as the user gave it (e.g. 1042)") }),
  execute: async ({ orderId }) => {
    const id = orderId.replace(/\D/g, "");
    const order = orders.get(id);
    return order ? { found: true, orderId: id, ...order } : { found: false, orderId: id };
  },
});

const model = process.env.OPENAI_API_KEY
  ? (await import("@ai-sdk/openai")).openai(process.env.OPENAI_MODEL ?? "gpt-4.1-mini")
  : (await import("./mock-model.mjs")).mockModel();

const support = aiFlow({
  name: "support",
  model,
  system: [
    "You are the support assistant of a small online shop. Be brief and friendly.",
    "When the user gives an order number, look it up with lookupOrder and answer from its result only: never invent an order, a date or a tracking number.",
    "When the user asks for a person, or you cannot help, call handover.",
  ].join(" "),
  tools: {
    lookupOrder,
    handover: handoverTool({ message: "A person from our support team will take it from here." }),
  },
});

const storage = sqlite(process.env.CHANNELKIT_DB ?? "./channelkit.db");
await storage.migrate();
const service = await createChannelService({
  storage,
  flows: [support],
  secretKey: process.env.CHANNELKIT_SECRET_KEY,
  // Handovers wait in the built-in inbox; its routes take admin tokens signed with this secret.
  livechat: liveChatInbox({ secret: process.env.CHANNELKIT_ADMIN_JWT_SECRET }),
});

const server = await serve(service, { port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? "127.0.0.1" });
console.log(process.env.OPENAI_API_KEY ? `model: OpenAI ${model.modelId}` : "model: mock (set OPENAI_API_KEY to use OpenAI)");
await provision(server.url);
console.log(`listening on ${server.url}`);

/**
 * On a first start (no tenant in the database), a tenant and an API channel bound to the
 * `support` flow, its key printed once, so that one command starts the example (with a
 * `channelkit.config.*` exporting these options, `npx channelkit channel create --flow
 * support` would do the same).
 */
async function provision(url) {
  const admin = service.admin.as("ai-agent-example");
  if ((await admin.countTenants()) > 0) {
    console.log("The database has a tenant already: no channel was created (delete it to start over).");
    return;
  }
  const { tenant } = await admin.createTenant({ name: "Shop" });
  const created = await admin.createChannel({ tenantId: tenant.id, flow: "support", name: "Support agent" });
  console.log("Tenant and support channel created.");
  console.log(`  tenant: ${tenant.id}`);
  console.log(`  channel: ${created.channel.id}`);
  console.log(`  API key (shown once, keep it): ${created.api_key}`);
  console.log("Try it:");
  const body = JSON.stringify({ payload: "Where is order 1042?" });
  console.log(`  curl -s ${url}/public/v1/api/execute -H 'Authorization: Bearer ${created.api_key}' -H 'Content-Type: application/json' -d '${body}'`);
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    const closed = server.close();
    await service.close(); // cancels runs in flight, so open streams end
    await closed;
    process.exit(0);
  });
}
