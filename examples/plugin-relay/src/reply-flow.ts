import { defineFlow, setState, text } from "@channelkit/core";

/**
 * The flow of the example's server and tests: answers `<user> said: <text> (message <n>)`,
 * the user read from the metadata the relay plugin passes, `n` counting the conversation's
 * messages in the flow's state.
 */
export const replyFlow = defineFlow<{ messages: number }>({
  name: "reply",
  version: "1",
  async *run(ctx) {
    const messages = (ctx.state?.messages ?? 0) + 1;
    yield text(`${String(ctx.metadata.relay_user_id ?? "someone")} said: ${ctx.payload} (message ${messages})`);
    yield setState({ messages });
    return { messages };
  },
});
