/**
 * Slack through `@chat-adapter/slack`, unchanged, on real SQLite and Postgres over real HTTP:
 * the Web API is a stand-in on 127.0.0.1 (the channel's `api_url`), and the Events API's
 * deliveries reach `serve()` signed as Slack signs them (`X-Slack-Signature`, v0). Two
 * services on one database share the deliveries, as two instances behind a load balancer do.
 */
import { createHmac } from "node:crypto";
import { defineFlow, externalConversationId, suggestions, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SlackMessage, SlackStandIn, STANDIN_BOT } from "./slack-standin.js";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "5e".repeat(32);
const BOT_TOKEN = "xoxb-1111-2222-channel-bot";
const SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543";
const TEAM = STANDIN_BOT.teamId;

/** What the process's environment says, wrongly for every channel: none of it may be used. */
const HOSTILE_ENV = {
  SLACK_API_URL: "http://127.0.0.1:9/api/",
  SLACK_BOT_TOKEN: "xoxb-from-the-environment",
  SLACK_SIGNING_SECRET: "signing-secret-from-the-environment",
  SLACK_APP_TOKEN: "xapp-from-the-environment",
  SLACK_SOCKET_FORWARDING_SECRET: "forwarding-secret-from-the-environment",
  SLACK_CLIENT_ID: "client-id-from-the-environment",
  SLACK_CLIENT_SECRET: "client-secret-from-the-environment",
  // Not a key: read, it would fail every channel's adapter.
  SLACK_ENCRYPTION_KEY: "not-a-key",
};

let eventNumber = 0;
let clock = 1_700_000_000;

/** A user's message as the Events API delivers it: `message` (message.im, message.channels) or `app_mention`. */
function event(
  fields: { channel: string; text: string; user?: string; threadTs?: string; type?: "message" | "app_mention"; ts?: string; botId?: string },
  eventId = `Ev${String(++eventNumber).padStart(8, "0")}`,
) {
  const ts = fields.ts ?? `${++clock}.000200`;
  const type = fields.type ?? "message";
  return {
    token: "unused-verification-token",
    team_id: TEAM,
    api_app_id: "A0000001",
    event: {
      type,
      channel: fields.channel,
      user: fields.user ?? "U0000001",
      text: fields.text,
      ts,
      event_ts: ts,
      team: TEAM,
      ...(type === "message" ? { channel_type: fields.channel.startsWith("D") ? "im" : "channel" } : {}),
      ...(fields.threadTs === undefined ? {} : { thread_ts: fields.threadTs }),
      ...(fields.botId === undefined ? {} : { bot_id: fields.botId }),
    },
    type: "event_callback",
    event_id: eventId,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ enterprise_id: null, team_id: TEAM, user_id: STANDIN_BOT.userId, is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
  };
}

/** Slack's v0 signature of a request body sent at `timestamp` (seconds). */
function signature(secret: string, timestamp: string, body: string): string {
  return `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
}

/** A gate the test opens. */
class Gate {
  open!: () => void;
  readonly opened = new Promise<void>((resolve) => {
    this.open = resolve;
  });
}

/** A paragraph longer than what Slack's streamer buffers (256 characters) before it starts a stream. */
const paragraph = (n: number) => `Paragraph ${n}: ${"lorem ipsum dolor ".repeat(16).trim()}.`;

function slackSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const slack = new SlackStandIn();
    const instances = new TwoInstances();
    const saved = Object.fromEntries(Object.keys(HOSTILE_ENV).map((key) => [key, process.env[key]]));
    let channelId: string;
    let slowChannelId: string;
    /** A channel whose flow only instance 0 has (a rolling deploy): instance 1 answers 503. */
    let newerChannelId: string;
    /** A channel whose flow writes a paragraph, waits for the test, then writes another. */
    let paragraphsChannelId: string;
    const secondParagraph = new Gate();
    /** A channel whose flow offers suggestions. */
    let coloursChannelId: string;
    /** A channel whose flow hands every conversation over to a human. */
    let handoverChannelId: string;

    const newer = defineFlow({
      name: "newer",
      version: "1",
      async *run(ctx) {
        yield text(`Newer: ${ctx.payload}`);
        return null;
      },
    });
    const paragraphs = defineFlow({
      name: "paragraphs",
      version: "1",
      async *run() {
        yield text(`${paragraph(1)}\n\n`);
        await secondParagraph.opened;
        yield text(paragraph(2));
        return null;
      },
    });

    const colours = defineFlow({
      name: "colours",
      version: "1",
      async *run(ctx) {
        yield text(`You said ${ctx.payload}`);
        yield suggestions(["Red", "Blue"]);
        return null;
      },
    });

    beforeAll(async () => {
      Object.assign(process.env, HOSTILE_ENV);
      await slack.start();
      await instances.start(await makeDatabase(), SECRET_KEY, (instance) => ({
        flows: instance === 0 ? [...demoFlows, newer, paragraphs, colours] : [...demoFlows, paragraphs, colours],
      }));
      const slackChannel = async (flow: string) =>
        (
          await instances.admin.createChannel({
            tenantId: instances.tenantId,
            flow,
            type: "slack",
            settings: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET, api_url: slack.apiUrl },
          })
        ).channel.id;
      channelId = await slackChannel("echo");
      slowChannelId = await slackChannel("slow");
      newerChannelId = await slackChannel("newer");
      paragraphsChannelId = await slackChannel("paragraphs");
      coloursChannelId = await slackChannel("colours");
      handoverChannelId = await slackChannel("handover");
    }, 60_000);

    afterAll(async () => {
      secondParagraph.open();
      await instances.stop();
      await slack.close();
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    });

    const deliver = (
      body: unknown,
      {
        to = 0,
        channel = channelId,
        secret = SIGNING_SECRET,
        timestamp = Math.floor(Date.now() / 1000),
        headers = {},
      }: { to?: number; channel?: string; secret?: string; timestamp?: number; headers?: Record<string, string> } = {},
    ) => {
      // Interactivity (a button pressed) comes as a form with the payload's JSON; events as JSON.
      const form = body instanceof URLSearchParams;
      const raw = form ? body.toString() : JSON.stringify(body);
      return fetch(instances.webhookUrl(channel, to), {
        method: "POST",
        headers: {
          "content-type": form ? "application/x-www-form-urlencoded" : "application/json",
          "x-slack-request-timestamp": String(timestamp),
          "x-slack-signature": signature(secret, String(timestamp), raw),
          ...headers,
        },
        body: raw,
      });
    };

    const history = (slackChannelId: string, threadTs = "", channel = channelId) => instances.history(channel, `slack:${slackChannelId}:${threadTs}`);
    const posted = () => slack.callsOf("chat.postMessage").length + slack.callsOf("chat.startStream").length;

    it("answers a direct message in its conversation, through the Web API at the channel's api_url, with the channel's own bot token; the conversation is one", async () => {
      expect((await deliver(event({ channel: "D0000501", user: "U0000501", text: "hello" }))).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000501").includes("Echo: hello"), "the reply to hello");
      expect((await deliver(event({ channel: "D0000501", user: "U0000501", text: "again" }), { to: 1 })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000501").includes("Echo: again"), "the reply to again");
      expect(slack.textOf("D0000501")).toEqual(["Echo: hello", "Echo: again"]);
      // Top-level in the direct message, not in a thread of the user's message.
      expect(slack.callsOf("chat.postMessage").every((call) => call.body.channel === "D0000501" && call.body.thread_ts === undefined)).toBe(true);
      expect(slack.calls.length).toBeGreaterThan(0);
      expect(slack.calls.every((call) => call.token === BOT_TOKEN)).toBe(true);
      expect(await history("D0000501")).toEqual(["user: hello", "assistant: Echo: hello", "user: again", "assistant: Echo: again"]);
    });

    it("does not answer the bot's own messages, which Slack delivers too", async () => {
      const before = posted();
      const own = event({ channel: "D0000502", user: STANDIN_BOT.userId, botId: STANDIN_BOT.botId, text: "Echo: something" });
      expect((await deliver(own)).status).toBe(200);
      expect((await deliver(event({ channel: "D0000502", user: "U0000502", text: "after" }), { to: 1 })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000502").includes("Echo: after"), "the reply to after");
      expect(posted() - before).toBe(1);
      expect(await history("D0000502")).toEqual(["user: after", "assistant: Echo: after"]);
    });

    it("answers Slack's url_verification with its challenge", async () => {
      const answered = await deliver(
        { token: "unused-verification-token", challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", type: "url_verification" },
        { to: 1 },
      );
      expect(answered.status).toBe(200);
      expect(await answered.json()).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    });

    it("refuses a delivery signed with another secret, or unsigned: 401, nothing runs, nothing is stored", async () => {
      const before = slack.calls.length;
      expect((await deliver(event({ channel: "D0000503", text: "forged" }), { secret: "another-secret" })).status).toBe(401);
      const unsigned = await fetch(instances.webhookUrl(channelId, 1), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(event({ channel: "D0000503", text: "unsigned" })),
      });
      expect(unsigned.status).toBe(401);
      expect(slack.calls.slice(before).filter((call) => call.method.startsWith("chat."))).toEqual([]);
      expect(await history("D0000503")).toEqual([]);
    });

    it("refuses a delivery signed more than five minutes ago (a replay): 401, nothing runs", async () => {
      const before = slack.calls.length;
      const replayed = await deliver(event({ channel: "D0000504", text: "replayed" }), { timestamp: Math.floor(Date.now() / 1000) - 10 * 60 });
      expect(replayed.status).toBe(401);
      expect(slack.calls.slice(before).filter((call) => call.method.startsWith("chat."))).toEqual([]);
      expect(await history("D0000504")).toEqual([]);
    });

    it("ignores the process's SLACK_* variables: a delivery signed with SLACK_SIGNING_SECRET, or forwarded with SLACK_SOCKET_FORWARDING_SECRET, is refused", async () => {
      expect((await deliver(event({ channel: "D0000505", text: "env" }), { secret: HOSTILE_ENV.SLACK_SIGNING_SECRET })).status).toBe(401);
      const forwarded = await fetch(instances.webhookUrl(channelId, 0), {
        method: "POST",
        headers: { "content-type": "application/json", "x-slack-socket-token": HOSTILE_ENV.SLACK_SOCKET_FORWARDING_SECRET },
        body: JSON.stringify({ type: "socket_event", eventType: "events_api", timestamp: Date.now(), body: event({ channel: "D0000505", text: "env" }) }),
      });
      expect(forwarded.status).toBe(401);
      expect(await history("D0000505")).toEqual([]);
    });

    it("refuses deliveries while Slack refuses the bot token (auth.test): a bot that cannot tell its own messages from its users' is not made, nothing runs", async () => {
      const refusedToken = "xoxb-3333-4444-revoked";
      slack.refusedTokens.add(refusedToken);
      const refusedChannelId = (
        await instances.admin.createChannel({
          tenantId: instances.tenantId,
          flow: "echo",
          type: "slack",
          settings: { bot_token: refusedToken, signing_secret: SIGNING_SECRET, api_url: slack.apiUrl },
        })
      ).channel.id;
      const refused = await deliver(event({ channel: "D0000513", user: "U0000513", text: "anyone?" }), { channel: refusedChannelId });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("delivery_failed");
      expect(slack.calls.filter((call) => call.token === refusedToken).map((call) => call.method)).toEqual(["auth.test"]);
      expect(await history("D0000513", "", refusedChannelId)).toEqual([]);
    });

    it("answers an event Slack delivers again (same event_id, X-Slack-Retry-Num), to the other instance, once", async () => {
      const first = event({ channel: "D0000506", user: "U0000506", text: "only once" });
      expect((await deliver(first)).status).toBe(200);
      const retry = { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout" };
      expect((await deliver(first, { to: 1, headers: retry })).status).toBe(200);
      expect((await deliver(first, { to: 0, headers: { ...retry, "x-slack-retry-num": "2" } })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000506").includes("Echo: only once"), "the reply");
      // One more message, answered after the retries: had they run, their replies came before it.
      expect((await deliver(event({ channel: "D0000506", user: "U0000506", text: "next" }), { to: 1 })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000506").includes("Echo: next"), "the reply to next");
      expect(slack.textOf("D0000506")).toEqual(["Echo: only once", "Echo: next"]);
      expect(await history("D0000506")).toEqual(["user: only once", "assistant: Echo: only once", "user: next", "assistant: Echo: next"]);
    });

    it("runs an event its instance could not run (503) when Slack delivers it again, and once", async () => {
      const first = event({ channel: "D0000507", user: "U0000507", text: "first" });
      const refused = await deliver(first, { to: 1, channel: newerChannelId });
      expect(refused.status).toBe(503);
      expect(await history("D0000507", "", newerChannelId)).toEqual([]);
      // Slack's retry reaches the instance that has the flow.
      const retry = { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_error" };
      expect((await deliver(first, { to: 0, channel: newerChannelId, headers: retry })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000507").includes("Newer: first"), "the reply to first");
      expect((await deliver(first, { to: 0, channel: newerChannelId, headers: { ...retry, "x-slack-retry-num": "2" } })).status).toBe(200);
      expect((await deliver(event({ channel: "D0000507", user: "U0000507", text: "second" }), { channel: newerChannelId })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000507").includes("Newer: second"), "the reply to second");
      expect(slack.textOf("D0000507")).toEqual(["Newer: first", "Newer: second"]);
      expect(await history("D0000507", "", newerChannelId)).toEqual(["user: first", "assistant: Newer: first", "user: second", "assistant: Newer: second"]);
    });

    it("answers a mention in a channel in its thread (Slack sends it as app_mention and as message, to either instance: once), then follows the thread", async () => {
      const mentionTs = `${++clock}.000300`;
      const text = `<@${STANDIN_BOT.userId}> hello there`;
      const answers = await Promise.all([
        deliver(event({ channel: "C0000601", user: "U0000601", text, ts: mentionTs, type: "app_mention" })),
        deliver(event({ channel: "C0000601", user: "U0000601", text, ts: mentionTs }), { to: 1 }),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
      await slack.waitFor(() => slack.textOf("C0000601", mentionTs).some((reply) => reply.endsWith("hello there")), "the reply to the mention");
      // A message of the thread without a mention: the bot follows the thread it was mentioned in.
      expect((await deliver(event({ channel: "C0000601", user: "U0000602", text: "and more", threadTs: mentionTs }), { to: 1 })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("C0000601", mentionTs).includes("Echo: and more"), "the reply in the thread");
      expect(slack.textOf("C0000601")).toHaveLength(2);
      expect(slack.textOf("C0000601", mentionTs)).toHaveLength(2);
      const stored = await history("C0000601", mentionTs);
      expect(stored).toHaveLength(4);
      expect(stored[0]).toMatch(/^user: .*hello there$/);
      expect(stored.slice(2)).toEqual(["user: and more", "assistant: Echo: and more"]);
      // A message in the channel outside the thread, without a mention, is not the bot's.
      const before = posted();
      expect((await deliver(event({ channel: "C0000601", user: "U0000603", text: "unrelated" }))).status).toBe(200);
      expect((await deliver(event({ channel: "C0000601", user: "U0000602", text: "last", threadTs: mentionTs }))).status).toBe(200);
      await slack.waitFor(() => slack.textOf("C0000601", mentionTs).includes("Echo: last"), "the reply to last");
      expect(posted() - before).toBe(1);
    });

    it("answers messages delivered one after another, alternately to two instances, in the order delivered", async () => {
      const words = ["one", "two", "three", "four", "five", "six"];
      for (const [i, word] of words.entries()) {
        expect((await deliver(event({ channel: "D0000508", user: "U0000508", text: word }), { to: i % 2 })).status).toBe(200);
      }
      await slack.waitFor(() => slack.textOf("D0000508").filter((reply) => reply.startsWith("Echo:")).length === words.length, "six replies");
      expect(slack.textOf("D0000508")).toEqual(words.map((word) => `Echo: ${word}`));
      expect(await history("D0000508")).toEqual(words.flatMap((word) => [`user: ${word}`, `assistant: Echo: ${word}`]));
    });

    it("answers every message of a burst to one thread delivered at once to two instances, each run in its turn", async () => {
      const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
      const answers = await Promise.all(words.map((word, i) => deliver(event({ channel: "D0000509", user: "U0000509", text: word }), { to: i % 2 })));
      expect(answers.map((answer) => answer.status)).toEqual(words.map(() => 200));
      await slack.waitFor(() => slack.textOf("D0000509").filter((reply) => reply.startsWith("Echo:")).length === words.length, "six replies");
      expect([...slack.textOf("D0000509")].sort()).toEqual(words.map((word) => `Echo: ${word}`).sort());
      // Each user message is followed by its own reply: the runs took turns.
      const stored = await history("D0000509");
      expect(stored).toHaveLength(12);
      for (let i = 0; i < stored.length; i += 2) expect(stored[i + 1]).toBe(`assistant: Echo: ${(stored[i] as string).slice("user: ".length)}`);
    });

    const SLOW_TEXT = Array.from({ length: 50 }, (_, i) => `word${i + 1}`).join(" ");

    it("streams a direct message's reply as it is produced: posted, then edited (chat.update) until it is whole", async () => {
      expect((await deliver(event({ channel: "D0000510", user: "U0000510", text: "go" }), { channel: slowChannelId })).status).toBe(200);
      // Read while the flow is still writing: the start of the reply, not its end.
      await slack.waitFor(() => slack.textOf("D0000510").some((reply) => reply.startsWith("word1 ") && !reply.includes("word50")), "part of the reply");
      await slack.waitFor(() => slack.textOf("D0000510").includes(SLOW_TEXT), "the whole reply");
      expect(slack.textOf("D0000510")).toEqual([SLOW_TEXT]);
      const edits = slack.callsOf("chat.update").filter((call) => call.body.channel === "D0000510");
      expect(edits.length).toBeGreaterThan(2);
      expect(await history("D0000510", "", slowChannelId)).toEqual(["user: go", `assistant: ${SLOW_TEXT}`]);
    });

    it("streams a reply in a channel thread with Slack's native streaming (chat.startStream while the flow writes, chat.stopStream at its end), to the user who asked", async () => {
      const mentionTs = `${++clock}.000400`;
      const mention = event({ channel: "C0000611", user: "U0000611", text: `<@${STANDIN_BOT.userId}> go`, ts: mentionTs, type: "app_mention" });
      expect((await deliver(mention, { channel: paragraphsChannelId, to: 1 })).status).toBe(200);
      // The flow holds its second paragraph until the first reached Slack.
      await slack.waitFor(() => slack.callsOf("chat.startStream").some((call) => call.body.channel === "C0000611"), "the stream's start");
      expect(slack.textOf("C0000611", mentionTs)).toEqual([`${paragraph(1)}\n\n`]);
      const [started] = slack.callsOf("chat.startStream").filter((call) => call.body.channel === "C0000611");
      expect(started?.body).toMatchObject({ thread_ts: mentionTs, recipient_user_id: "U0000611", recipient_team_id: TEAM });
      secondParagraph.open();
      await slack.waitFor(() => slack.callsOf("chat.stopStream").some((call) => call.body.channel === "C0000611"), "the stream's end");
      const whole = `${paragraph(1)}\n\n${paragraph(2)}`;
      expect(slack.textOf("C0000611")).toEqual([whole]);
      expect(slack.callsOf("chat.startStream").filter((call) => call.body.channel === "C0000611")).toHaveLength(1);
      expect(await history("C0000611", mentionTs, paragraphsChannelId)).toEqual([expect.stringMatching(/^user: .*go$/), `assistant: ${whole}`]);
    });

    /** The button of a suggestion on a message of the bot, as Block Kit carries it. */
    const buttonOf = (message: SlackMessage | undefined, label: string) =>
      (message?.blocks ?? [])
        .flatMap((block) => (block.type === "actions" ? (block.elements as { type: string; action_id: string; value: string; text: { text: string } }[]) : []))
        .find((element) => element.type === "button" && element.text.text === label);

    /** A user pressing a button of the bot's message, as Slack's interactivity delivers it (block_actions). */
    const press = (message: SlackMessage, user: string, label: string) => {
      const button = buttonOf(message, label);
      if (button === undefined) throw new Error(`no button ${label} on ${JSON.stringify(message)}`);
      const payload = {
        type: "block_actions",
        user: { id: user, username: `user-${user}`, name: `user-${user}`, team_id: TEAM },
        api_app_id: "A0000001",
        token: "unused-verification-token",
        container: { type: "message", message_ts: message.ts, channel_id: message.channel, is_ephemeral: false },
        trigger_id: `${++clock}.1234.abcdef`,
        team: { id: TEAM, domain: "acme" },
        channel: { id: message.channel, name: message.channel.startsWith("D") ? "directmessage" : "general" },
        message: {
          type: "message",
          user: STANDIN_BOT.userId,
          bot_id: STANDIN_BOT.botId,
          ts: message.ts,
          text: message.text,
          blocks: message.blocks,
          ...(message.threadTs === undefined ? {} : { thread_ts: message.threadTs }),
        },
        response_url: "https://hooks.slack.com/actions/T0000001/1/unused",
        actions: [{ ...button, block_id: "actions", action_ts: `${clock}.000500` }],
      };
      return new URLSearchParams({ payload: JSON.stringify(payload) });
    };

    it("offers a flow's suggestions as buttons on its reply in a direct message; a button pressed is the user saying it, in the same conversation", async () => {
      expect((await deliver(event({ channel: "D0000514", user: "U0000514", text: "colour?" }), { channel: coloursChannelId })).status).toBe(200);
      await slack.waitFor(() => buttonOf(slack.messagesOf("D0000514")[0], "Blue") !== undefined, "the reply's buttons");
      const [offered] = slack.messagesOf("D0000514");
      expect((await deliver(press(offered as SlackMessage, "U0000514", "Blue"), { channel: coloursChannelId, to: 1 })).status).toBe(200);
      await slack.waitFor(
        () => slack.messagesOf("D0000514").length === 2 && buttonOf(slack.messagesOf("D0000514")[1], "Red") !== undefined,
        "the reply to Blue",
      );
      // Top-level in the direct message, as every reply there.
      expect(slack.messagesOf("D0000514").map((message) => message.threadTs)).toEqual([undefined, undefined]);
      expect(await history("D0000514", "", coloursChannelId)).toEqual([
        "user: colour?",
        "assistant: You said colour?",
        "user: Blue",
        "assistant: You said Blue",
      ]);
    });

    it("offers suggestions as buttons in a channel thread too; a button pressed runs the flow in the thread", async () => {
      const mentionTs = `${++clock}.000600`;
      const mention = event({ channel: "C0000615", user: "U0000615", text: `<@${STANDIN_BOT.userId}> colour?`, ts: mentionTs, type: "app_mention" });
      expect((await deliver(mention, { channel: coloursChannelId })).status).toBe(200);
      await slack.waitFor(() => buttonOf(slack.messagesOf("C0000615", mentionTs)[0], "Red") !== undefined, "the reply's buttons");
      const [offered] = slack.messagesOf("C0000615", mentionTs);
      expect((await deliver(press(offered as SlackMessage, "U0000616", "Red"), { channel: coloursChannelId, to: 1 })).status).toBe(200);
      await slack.waitFor(() => buttonOf(slack.messagesOf("C0000615", mentionTs)[1], "Red") !== undefined, "the reply to Red");
      expect(slack.messagesOf("C0000615")).toHaveLength(2);
      const stored = await history("C0000615", mentionTs, coloursChannelId);
      expect(stored.slice(2)).toEqual(["user: Red", "assistant: You said Red"]);
    });

    it("hands over to a human: the agent's replies are posted in the direct message, the user's messages reach the agent, not the flow", async () => {
      expect((await deliver(event({ channel: "D0000517", user: "U0000517", text: "I need a person" }), { channel: handoverChannelId })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000517").includes("Connecting you to an agent"), "the handover's message");
      const conversationId = await externalConversationId({ id: handoverChannelId }, "slack:D0000517:");
      // The agent answers from the inbox of the other instance.
      const inbox = (path: string, body?: unknown) =>
        fetch(`${(instances.servers[1] as { url: string }).url}/api/v1/livechat/conversations/${conversationId}${path}`, {
          method: "POST",
          headers: { "x-tenant-id": instances.tenantId, "content-type": "application/json" },
          body: JSON.stringify(body ?? {}),
        });
      expect((await inbox("/accept")).status).toBe(200);
      expect((await inbox("/messages", { content: "Hi, I am Ana. How can I help?" })).status).toBe(200);
      await slack.waitFor(() => slack.textOf("D0000517").includes("Agent: Hi, I am Ana. How can I help?"), "the agent's message in the direct message");
      expect(slack.messagesOf("D0000517").every((message) => message.threadTs === undefined)).toBe(true);
      expect((await deliver(event({ channel: "D0000517", user: "U0000517", text: "My order is late" }), { channel: handoverChannelId, to: 1 })).status).toBe(
        200,
      );
      await expect.poll(() => history("D0000517", "", handoverChannelId)).toContain("user: My order is late");
      expect(slack.textOf("D0000517")).toEqual(["Connecting you to an agent", "Agent: Hi, I am Ana. How can I help?"]);
    });

    it("an inactive channel answers 200 and runs nothing, so that Slack stops retrying", async () => {
      await instances.admin.updateChannel(channelId, { state: "inactive" });
      try {
        const before = slack.calls.length;
        const answered = await deliver(event({ channel: "D0000512", user: "U0000512", text: "anyone?" }));
        expect(answered.status).toBe(200);
        expect(await answered.json()).toEqual({ ignored: "inactive" });
        expect(slack.calls.slice(before)).toEqual([]);
        expect(await history("D0000512")).toEqual([]);
      } finally {
        await instances.admin.updateChannel(channelId, { state: "active" });
      }
    });
  });
}

slackSuite("Slack on SQLite", sqliteDatabase);
describeWithPostgres("Slack on Postgres", (serverUrl) => slackSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
