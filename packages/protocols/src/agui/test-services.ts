import {
  type ChannelPlugin,
  type ChannelService,
  createChannelService,
  defineFlow,
  definePlugin,
  externalConversationId,
  message,
  type RunOutcome,
  setState,
  step,
  text,
} from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import type { KyselyStorage } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import { aguiChannels } from "./index.js";
import type { SharedTestDatabase } from "@channelkit/testkit";

/**
 * A flow that calls a tool as a model's agent loop does: it says what it does, calls
 * `weather` with the city, reads its result, keeps the city in its state and answers.
 */
export const weather = defineFlow({
  name: "weather",
  version: "1",
  async *run(ctx) {
    yield step("plan", "llm");
    yield text("Let me look that up.");
    yield message("", { toolCalls: [{ id: "call_weather_1", name: "weather", arguments: { city: ctx.payload } }] });
    yield step("weather", "tool");
    yield message(JSON.stringify({ city: ctx.payload, sky: "sunny" }), { role: "tool", toolCallId: "call_weather_1" });
    yield setState({ lastCity: ctx.payload });
    yield step("answer", "llm");
    yield text(`It is sunny in ${ctx.payload}.`);
  },
});

/** The database the tests' two services share (testkit's). */
export {
  postgresSharedDatabase as postgresDatabase,
  type SharedTestDatabase as TestDatabase,
  sqliteSharedDatabase as sqliteDatabase,
} from "@channelkit/testkit";

/** The runs that ended, on either instance, told by the services' `runEnded` hook: what a test waits on. */
export class RunEnds {
  readonly #ended = new Map<string, RunOutcome>();
  readonly #waiting = new Map<string, (outcome: RunOutcome) => void>();

  plugin(): ChannelPlugin {
    return definePlugin({ id: "agui-test-run-ends", hooks: { runEnded: (event) => this.#end(event.outcome) } });
  }

  /** The outcome of the first run of a conversation to end, once it ended. */
  of(conversationId: string): Promise<RunOutcome> {
    const ended = this.#ended.get(conversationId);
    if (ended) return Promise.resolve(ended);
    return new Promise((resolve) => this.#waiting.set(conversationId, resolve));
  }

  #end(outcome: RunOutcome): void {
    if (this.#ended.has(outcome.conversationId)) return;
    this.#ended.set(outcome.conversationId, outcome);
    this.#waiting.get(outcome.conversationId)?.(outcome);
  }
}

/**
 * Two services on one database, each on its own connection and its own HTTP server on
 * 127.0.0.1, as two instances behind a load balancer: the AG-UI plugin and the demo flows.
 */
export class TwoInstances {
  readonly services: ChannelService[] = [];
  readonly servers: RunningServer[] = [];
  readonly storages: KyselyStorage[] = [];
  #database: SharedTestDatabase | undefined;
  tenantId = "";
  readonly runEnds = new RunEnds();

  async start(database: SharedTestDatabase, secretKey: string): Promise<void> {
    this.#database = database;
    const first = database.open();
    await first.migrate({ plugins: [aguiChannels()] });
    for (const storage of [first, database.open()]) {
      this.storages.push(storage);
      const service = await createChannelService({
        storage,
        flows: [...demoFlows, weather],
        secretKey,
        plugins: [aguiChannels(), this.runEnds.plugin()],
        logger: { warn() {}, error() {} },
      });
      this.services.push(service);
      this.servers.push(await serve(service, { port: 0, host: "127.0.0.1" }));
    }
    this.tenantId = (await this.admin.createTenant({ name: "AG-UI" })).tenant.id;
  }

  get admin(): ChannelService["admin"] {
    return (this.services[0] as ChannelService).admin;
  }

  /** An AG-UI channel of `flow`: its id and its key (publishable, for these origins, with `allowedOrigins`). */
  async channel(flow: string, allowedOrigins?: string[]): Promise<{ id: string; key: string }> {
    const visible = allowedOrigins ? { mode: "public" as const, allowedOrigins } : {};
    const created = await this.admin.createChannel({ tenantId: this.tenantId, flow, type: "agui", settings: {}, ...visible });
    return { id: created.channel.id, key: created.api_key };
  }

  /** The URL of a channel's AG-UI endpoint on instance `to`. */
  url(channelId: string, to = 0): string {
    return `${(this.servers[to] as RunningServer).url}/channels/agui/${channelId}`;
  }

  /** The stored messages of a thread's conversation, `role: content`. */
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
