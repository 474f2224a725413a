import { describe, expect, it } from "vitest";
import { echoFlow } from "../flows/demo.js";
import {
  channelFlow,
  type ChannelRecord,
  createChannelService,
  definePlugin,
  externalConversationId,
  memoryStorage,
  runToEnd,
  type ServiceContext,
} from "../index.js";

/** A service on the memory store, the context its plugins get, and one of its channels. */
async function setUp() {
  const storage = memoryStorage();
  let ctx: ServiceContext | undefined;
  const service = await createChannelService({
    storage,
    flows: [echoFlow],
    secretKey: "ab".repeat(32),
    plugins: [
      definePlugin({
        id: "probe",
        init(context) {
          ctx = context;
        },
      }),
    ],
  });
  const { tenant } = await service.admin.createTenant({ name: "Keys" });
  const { channel } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
  return { service, storage, ctx: ctx as ServiceContext, channel: (await storage.findChannel(channel.id)) as ChannelRecord };
}

describe("ctx.runs.start on an external key", () => {
  for (const live of [false, true]) {
    it(`two first messages of one key at once (${live ? "streamed" : "answered whole"}): both run, in the one conversation of the key`, async () => {
      const { service, storage, ctx, channel } = await setUp();
      const start = (payload: string) =>
        ctx.runs.start({ channel, flow: channelFlow(ctx, channel), conversation: { externalKey: "thread-1" }, payload, request: null, live });
      // Both started before either flow runs (a run's flow runs as its steps are pulled): as on two instances.
      const runs = await Promise.all([start("one"), start("two")]);
      const outcomes = await Promise.all(runs.map((run) => runToEnd(run)));
      const id = await externalConversationId(channel, "thread-1");
      expect(runs.map((run) => run.conversationId)).toEqual([id, id]);
      expect(outcomes.map((outcome) => outcome.status)).toEqual(["success", "success"]);
      const history = await storage.listRecentMessages(id, 10);
      expect(
        history
          .filter((message) => message.role === "user")
          .map((message) => message.content)
          .sort(),
      ).toEqual(["one", "two"]);
      expect(history).toHaveLength(4);
      await service.close();
    });
  }
});
