import { type Message, Role, type SendMessageRequest } from "@a2a-js/sdk";
import { type Client, ClientFactory, ClientFactoryOptions, createAuthenticatingFetchWithRetry, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { type ChannelService, createChannelService, definePlugin } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import type { KyselyStorage } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import { a2aChannels } from "./index.js";
import type { SharedTestDatabase } from "@channelkit/testkit";

/** The database the tests' two services share (testkit's). */
export {
  postgresSharedDatabase as postgresDatabase,
  type SharedTestDatabase as TestDatabase,
  sqliteSharedDatabase as sqliteDatabase,
} from "@channelkit/testkit";

/** An A2A channel of the tests: its id and its key. */
export interface A2aTestChannel {
  id: string;
  key: string;
}

/** A user message of the SDK's types, in `contextId` (and continuing `taskId`) when given. */
export function userMessage(text: string, ids: { contextId?: string; taskId?: string } = {}): SendMessageRequest {
  const message: Message = {
    messageId: crypto.randomUUID(),
    contextId: ids.contextId ?? "",
    taskId: ids.taskId ?? "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: {}, filename: "", mediaType: "text/plain" }],
    metadata: {},
    extensions: [],
    referenceTaskIds: [],
  };
  return { tenant: "", message, configuration: undefined, metadata: {} };
}

/**
 * Two services on one database, each on its own connection and its own HTTP server on
 * 127.0.0.1, as two instances behind a load balancer: the A2A plugin and the demo flows.
 */
export class TwoInstances {
  readonly services: ChannelService[] = [];
  readonly servers: RunningServer[] = [];
  readonly storages: KyselyStorage[] = [];
  #database: SharedTestDatabase | undefined;
  tenantId = "";

  async start(database: SharedTestDatabase, secretKey: string): Promise<void> {
    this.#database = database;
    const first = database.open();
    await first.migrate({ plugins: [a2aChannels()] });
    for (const storage of [first, database.open()]) {
      this.storages.push(storage);
      // A live-chat desk that takes every handover (and does nothing with it), so that the handover flow hands over.
      const livechat = definePlugin({ id: "a2a-test-desk" });
      const service = await createChannelService({
        storage,
        flows: demoFlows,
        secretKey,
        livechat,
        plugins: [a2aChannels()],
        logger: { warn() {}, error() {} },
      });
      this.services.push(service);
      this.servers.push(await serve(service, { port: 0, host: "127.0.0.1" }));
    }
    this.tenantId = (await this.admin.createTenant({ name: "A2A" })).tenant.id;
  }

  get admin(): ChannelService["admin"] {
    return (this.services[0] as ChannelService).admin;
  }

  /** An A2A channel of `flow` with these settings. */
  async channel(flow: string, settings: Record<string, unknown> = {}): Promise<A2aTestChannel> {
    const created = await this.admin.createChannel({ tenantId: this.tenantId, flow, type: "a2a", settings });
    return { id: created.channel.id, key: created.api_key };
  }

  /** The base URL of instance `to`. */
  url(to = 0): string {
    return (this.servers[to] as RunningServer).url;
  }

  /** The agent's address on instance `to`: its card is under it (the trailing `/` keeps the channel's id in the card's URL). */
  agentUrl(channel: A2aTestChannel, to = 0): string {
    return `${this.url(to)}/channels/a2a/${channel.id}/`;
  }

  /** The SDK's client, made from the channel's card on instance `to`, sending `key` (the channel's by default) as Bearer. */
  connect(channel: A2aTestChannel, options: { to?: number; key?: string } = {}): Promise<Client> {
    const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
      headers: async () => ({ Authorization: `Bearer ${options.key ?? channel.key}` }),
      shouldRetryWithHeaders: async () => undefined,
    });
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] }),
    );
    return factory.createFromUrl(this.agentUrl(channel, options.to));
  }

  async stop(): Promise<void> {
    for (const server of this.servers) await server.close();
    for (const service of this.services) await service.close();
    await this.#database?.dispose();
  }
}
