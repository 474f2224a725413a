/** The test docs/plugins.md ends with, as its reader writes it (`relay.test.ts` there, importing `./relay.js`). */
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";
import { serve } from "@channelkit/node";
import { expect, it } from "vitest";
import { relayChannel } from "./index.js";

const TOKEN = "a-relay-token-of-16-characters-or-more";

it("runs the channel's flow on a delivery, posts the reply to the platform, and runs a retried delivery once", async () => {
  // The platform's side: a server taking the replies the plugin posts.
  const replies: unknown[] = [];
  let onReply = () => {};
  const replied = new Promise<void>((resolve) => {
    onReply = resolve;
  });
  const platform = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      replies.push(JSON.parse(body));
      response.end();
      onReply();
    });
  });
  platform.listen(0, "127.0.0.1");
  await once(platform, "listening");
  const callbackUrl = `http://127.0.0.1:${(platform.address() as AddressInfo).port}/replies`;

  // The service with the plugin, on a SQLite file of its own, over HTTP.
  const dir = await mkdtemp(join(tmpdir(), "relay-"));
  const storage = sqlite(join(dir, "relay.db"));
  const plugins = [relayChannel()];
  await storage.migrate({ plugins });
  const service = await createChannelService({ storage, flows: demoFlows, plugins, secretKey: "5a".repeat(32) });
  const server = await serve(service, { port: 0 });
  try {
    const { tenant } = await service.admin.createTenant({ name: "Acme" });
    const { channel } = await service.admin.createChannel({
      tenantId: tenant.id,
      flow: "echo",
      type: "relay",
      settings: { callback_url: callbackUrl, token: TOKEN },
    });
    const deliver = (update: object, token = TOKEN) =>
      fetch(`${server.url}/channels/relay/${channel.id}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-relay-token": token },
        body: JSON.stringify(update),
      });
    const update = { update_id: 1, thread_id: "thread-1", user_id: "ada", text: "Hello" };

    const refused = await deliver(update, "not-the-channel-token");
    expect(refused.status).toBe(401);
    expect((await refused.json()).error.code).toBe("relay_token_invalid");

    const answered = await deliver(update);
    expect(answered.status).toBe(200);
    expect(await answered.json()).toMatchObject({ status: "success" });
    // The runEnded hook posts the reply: wait for the platform to receive it.
    await replied;
    expect(replies).toEqual([{ thread_id: "thread-1", text: "Echo: Hello" }]);

    // The platform's retry of the same update runs nothing.
    expect(await (await deliver(update)).json()).toEqual({ duplicate: true });
  } finally {
    await server.close();
    await service.close();
    platform.close();
    await rm(dir, { recursive: true, force: true });
  }
});
