import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type RunningServer, serve } from "@channelkit/node";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mcpChannels } from "./index.js";
import type { SharedTestDatabase } from "@channelkit/testkit";

/** The database the tests' two services share (testkit's). */
export {
  postgresSharedDatabase as postgresDatabase,
  type SharedTestDatabase as TestDatabase,
  sqliteSharedDatabase as sqliteDatabase,
} from "@channelkit/testkit";

/** An MCP channel of the tests: its id and its key. */
export interface McpTestChannel {
  id: string;
  key: string;
}

/** The cap on a key's open streams in the tests' services. */
export const MCP_STREAMS_PER_KEY = 2;

/**
 * Two services on one database, each on its own connection and its own HTTP server on
 * 127.0.0.1, as two instances behind a load balancer: the MCP plugin and the demo flows.
 */
export class TwoInstances {
  readonly services: ChannelService[] = [];
  readonly servers: RunningServer[] = [];
  readonly clients: Client[] = [];
  #database: SharedTestDatabase | undefined;
  tenantId = "";

  async start(database: SharedTestDatabase, secretKey: string): Promise<void> {
    this.#database = database;
    const first = database.open();
    await first.migrate({ plugins: [mcpChannels()] });
    for (const storage of [first, database.open()]) {
      const service = await createChannelService({
        storage,
        flows: demoFlows,
        secretKey,
        plugins: [mcpChannels()],
        // Two streams at once per key: a call that just ended may hold its slot a moment more.
        streamLimits: { perKey: MCP_STREAMS_PER_KEY },
        logger: { warn() {}, error() {} },
      });
      this.services.push(service);
      this.servers.push(await serve(service, { port: 0, host: "127.0.0.1" }));
    }
    this.tenantId = (await this.admin.createTenant({ name: "MCP" })).tenant.id;
  }

  get admin(): ChannelService["admin"] {
    return (this.services[0] as ChannelService).admin;
  }

  /** An MCP channel of `flow` with these settings. */
  async channel(flow: string, settings: Record<string, unknown> = {}): Promise<McpTestChannel> {
    const created = await this.admin.createChannel({ tenantId: this.tenantId, flow, type: "mcp", settings });
    return { id: created.channel.id, key: created.api_key };
  }

  /** The base URL of instance `to`. */
  url(to = 0): string {
    return (this.servers[to] as RunningServer).url;
  }

  /** The SDK's client, connected to a channel's MCP endpoint on instance `to` with `key` (the channel's by default). */
  async connect(channel: McpTestChannel, options: { to?: number; key?: string } = {}): Promise<Client> {
    const client = new Client({ name: "channelkit-mcp-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${this.url(options.to)}/channels/mcp/${channel.id}`), {
      requestInit: { headers: { authorization: `Bearer ${options.key ?? channel.key}` } },
    });
    this.clients.push(client);
    await client.connect(transport);
    return client;
  }

  async stop(): Promise<void> {
    for (const client of this.clients) await client.close();
    for (const server of this.servers) await server.close();
    for (const service of this.services) await service.close();
    await this.#database?.dispose();
  }
}
