import { type ChannelService, type ChannelServiceOptions, createChannelService, externalConversationId, liveChatInbox } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import type { KyselyStorage } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import { chatChannels } from "./index.js";
import type { SharedTestDatabase } from "@channelkit/testkit";

/** The database the tests' two services share (testkit's). */
export {
  postgresSharedDatabase as postgresDatabase,
  type SharedTestDatabase as TestDatabase,
  sqliteSharedDatabase as sqliteDatabase,
} from "@channelkit/testkit";

/**
 * Two services on one database, each on its own connection and its own HTTP server on
 * 127.0.0.1, as two instances behind a load balancer: the chat plugin, the demo flows and the
 * development inbox.
 */
export class TwoInstances {
  readonly services: ChannelService[] = [];
  readonly servers: RunningServer[] = [];
  readonly storages: KyselyStorage[] = [];
  #database: SharedTestDatabase | undefined;
  tenantId = "";

  /** `options` adds to (or replaces) the options of each service (by its index): other flows, a shorter turn wait. */
  async start(database: SharedTestDatabase, secretKey: string, options: (instance: number) => Partial<ChannelServiceOptions> = () => ({})): Promise<void> {
    this.#database = database;
    const first = database.open();
    await first.migrate({ plugins: [chatChannels()] });
    for (const storage of [first, database.open()]) {
      this.storages.push(storage);
      const service = await createChannelService({
        storage,
        flows: demoFlows,
        secretKey,
        plugins: [chatChannels()],
        livechat: liveChatInbox({ development: true }),
        logger: { warn() {}, error() {} },
        ...options(this.services.length),
      });
      this.services.push(service);
      this.servers.push(await serve(service, { port: 0, host: "127.0.0.1" }));
    }
    this.tenantId = (await this.admin.createTenant({ name: "Chat platforms" })).tenant.id;
  }

  get admin(): ChannelService["admin"] {
    return (this.services[0] as ChannelService).admin;
  }

  /** The URL of a channel's webhook on instance `to`. */
  webhookUrl(channelId: string, to = 0): string {
    return `${(this.servers[to] as RunningServer).url}/channels/chat/${channelId}`;
  }

  /** The stored messages of a platform thread's conversation, `role: content`. */
  async history(channelId: string, threadId: string): Promise<string[]> {
    const conversationId = await externalConversationId({ id: channelId }, threadId);
    const messages = await (this.storages[0] as KyselyStorage).listRecentMessages(conversationId, 100);
    return messages.map((message) => `${message.role}: ${message.content}`);
  }

  async stop(): Promise<void> {
    for (const server of this.servers) await server.close();
    for (const service of this.services) await service.close();
    await this.#database?.dispose();
  }
}
