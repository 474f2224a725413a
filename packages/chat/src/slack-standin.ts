import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A Web API call the adapter made: the token of its `Authorization: Bearer`, and its arguments. */
export interface SlackCall {
  token: string;
  method: string;
  body: Record<string, unknown>;
}

/** The bot the stand-in's auth.test answers. */
export const STANDIN_BOT = { userId: "UBOT0001", botId: "BBOT0001", name: "helper", teamId: "T0000001" } as const;

/** A message the bot posted, as it reads now. */
export interface SlackMessage {
  ts: string;
  channel: string;
  threadTs: string | undefined;
  text: string;
  /** Its Block Kit blocks, when posted or edited with blocks (a card: buttons). */
  blocks: Record<string, unknown>[] | undefined;
}

/** Arguments the Web API client JSON-encodes in its form body. */
const JSON_ARGUMENTS = new Set(["chunks", "blocks", "attachments", "metadata"]);

/**
 * Slack's Web API as the adapter sees it, on 127.0.0.1 (`api_url` = `{url}/api/`): auth.test,
 * users.info, conversations.info, then the messages the bot posts, edits and streams
 * (chat.postMessage, chat.update, chat.startStream / appendStream / stopStream). Records
 * every call; `textOf(channel)` is what a Slack user would read there now, message by message.
 */
export class SlackStandIn {
  readonly calls: SlackCall[] = [];
  /** Tokens Slack refuses (`invalid_auth`), as a revoked or mistyped one. */
  readonly refusedTokens = new Set<string>();
  readonly #messages = new Map<string, SlackMessage>();
  readonly #waiting = new Set<() => void>();
  #clock = 1_800_000_000;
  #server: Server | undefined;
  url = "";

  /** The Web API's base URL, as a channel's `api_url`. */
  get apiUrl(): string {
    return `${this.url}/api/`;
  }

  async start(): Promise<void> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const method = /^\/api\/([\w.]+)/.exec(request.url ?? "")?.[1] ?? "";
        const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? "")?.[1] ?? "";
        const body: Record<string, unknown> = {};
        for (const [name, value] of new URLSearchParams(Buffer.concat(chunks).toString())) body[name] = JSON_ARGUMENTS.has(name) ? JSON.parse(value) : value;
        this.calls.push({ token, method, body });
        const answer = this.refusedTokens.has(token) ? { ok: false, error: "invalid_auth" } : { ok: true, ...this.#answer(method, body) };
        response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
        for (const wake of [...this.#waiting]) wake();
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #answer(method: string, body: Record<string, unknown>): Record<string, unknown> {
    const channel = String(body.channel ?? "");
    switch (method) {
      case "auth.test":
        return {
          url: "https://acme.slack.com/",
          team: "Acme",
          user: STANDIN_BOT.name,
          team_id: STANDIN_BOT.teamId,
          user_id: STANDIN_BOT.userId,
          bot_id: STANDIN_BOT.botId,
        };
      case "users.info": {
        const id = String(body.user);
        const name = id === STANDIN_BOT.userId ? STANDIN_BOT.name : `user-${id}`;
        return { user: { id, name, real_name: `Real ${name}`, is_bot: id === STANDIN_BOT.userId, profile: { display_name: name, real_name: `Real ${name}` } } };
      }
      case "conversations.info":
        return { channel: { id: channel, name: `name-${channel}`, is_channel: channel.startsWith("C"), is_im: channel.startsWith("D") } };
      case "chat.postMessage":
      case "chat.startStream": {
        const ts = this.#nextTs();
        const threadTs = body.thread_ts === undefined ? undefined : String(body.thread_ts);
        this.#messages.set(ts, { ts, channel, threadTs, text: textOf(body), blocks: blocksOf(body) });
        return { channel, ts, message: { type: "message", ts, text: textOf(body), user: STANDIN_BOT.userId, bot_id: STANDIN_BOT.botId } };
      }
      case "chat.update": {
        const ts = String(body.ts);
        const message = this.#messages.get(ts);
        if (message) Object.assign(message, { text: textOf(body), blocks: blocksOf(body) });
        return { channel, ts, text: textOf(body) };
      }
      case "chat.appendStream":
      case "chat.stopStream": {
        const ts = String(body.ts);
        const message = this.#messages.get(ts);
        if (message) message.text += textOf(body);
        return { channel, ts, ...(method === "chat.stopStream" && message ? { message: { type: "message", ts, text: message.text } } : {}) };
      }
      default:
        return {};
    }
  }

  #nextTs(): string {
    this.#clock += 1;
    return `${this.#clock}.000100`;
  }

  /** The bot's messages in a Slack channel (or, given `threadTs`, in one of its threads) as they read now. */
  messagesOf(channel: string, threadTs?: string): SlackMessage[] {
    return [...this.#messages.values()].filter((message) => message.channel === channel && (threadTs === undefined || message.threadTs === threadTs));
  }

  /** The text of the bot's messages in a Slack channel (or one of its threads) as they read now. */
  textOf(channel: string, threadTs?: string): string[] {
    return this.messagesOf(channel, threadTs).map((message) => message.text);
  }

  /** The calls of one Web API method. */
  callsOf(method: string): SlackCall[] {
    return this.calls.filter((call) => call.method === method);
  }

  /** Resolves once `done()` holds after a call; fails after `ms`, naming what it waited for. */
  waitFor(done: () => boolean, what: string, ms = 15_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const wake = () => {
        if (!done()) return;
        this.#waiting.delete(wake);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiting.delete(wake);
        reject(
          new Error(`Slack stand-in: still waiting for ${what} after ${ms} ms; calls: ${JSON.stringify(this.calls.map((call) => [call.method, call.body]))}`),
        );
      }, ms);
      this.#waiting.add(wake);
      wake();
    });
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}

function blocksOf(body: Record<string, unknown>): Record<string, unknown>[] | undefined {
  return Array.isArray(body.blocks) ? (body.blocks as Record<string, unknown>[]) : undefined;
}

/** A message's text: `text`, or Markdown as `markdown_text`, or a stream's markdown chunks. */
function textOf(body: Record<string, unknown>): string {
  const chunks = Array.isArray(body.chunks) ? (body.chunks as { type?: string; text?: string }[]) : [];
  const streamed = chunks
    .filter((chunk) => chunk.type === "markdown_text")
    .map((chunk) => chunk.text ?? "")
    .join("");
  return streamed + String(body.markdown_text ?? body.text ?? "");
}
