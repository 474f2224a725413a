import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type KyselyStorage, postgres, sqlite } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import { createTestDatabase } from "@channelkit/testkit";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mcpChannels } from "./index.js";

/** A database the tests open twice, and how to remove it. */
export interface TestDatabase {
  open(): KyselyStorage;
  dispose(): Promise<void>;
}

/** A SQLite file in a folder of its own. */
export async function sqliteDatabase(): Promise<TestDatabase> {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-mcp-"));
  const location = join(dir, "mcp.db");
  return { open: () => sqlite(location), dispose: () => rm(dir, { recursive: true, force: true }) };
}

/** A Postgres database of its own on the test server. */
export async function postgresDatabase(serverUrl: string): Promise<TestDatabase> {
  const database = await createTestDatabase(serverUrl);
  return { open: () => postgres(database.url), dispose: () => database.drop() };
}

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
  #database: TestDatabase | undefined;
  tenantId = "";

  async start(database: TestDatabase, secretKey: string): Promise<void> {
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
