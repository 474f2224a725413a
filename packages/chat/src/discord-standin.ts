import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A REST call the adapter made. */
export interface DiscordCall {
  method: string;
  path: string;
  authorization: string | undefined;
  body: Record<string, unknown>;
}

/** A message the bot posted, as it reads now. */
export interface PostedMessage {
  id: string;
  channelId: string;
  /** Its `content`, or its embed's description once it became a card. */
  text: string;
  /** The buttons of its action rows: label and `custom_id`. */
  buttons: { label: string; customId: string }[];
}

interface ActionRow {
  components?: { label?: string; custom_id?: string }[];
}

/** A public thread's channel type (discord-api-types' ChannelType.PublicThread). */
const PUBLIC_THREAD = 11;

/**
 * Discord's REST API (v10) as the adapter sees it, on 127.0.0.1 (`api_url`): messages posted
 * and edited, threads started from a message, channels looked up, typing. Records every
 * call; `textOf(channelId)` is what a Discord user would read in that channel or thread now.
 */
export class DiscordStandIn {
  readonly calls: DiscordCall[] = [];
  readonly #messages = new Map<string, PostedMessage>();
  /** Each thread's parent channel. */
  readonly #threads = new Map<string, string>();
  readonly #waiting = new Set<() => void>();
  #nextId = 9_000_000_000_000_000_000n;
  #server: Server | undefined;
  url = "";

  constructor(readonly applicationId: string) {}

  async start(): Promise<void> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        const call: DiscordCall = {
          method: request.method ?? "GET",
          path: request.url ?? "",
          authorization: request.headers.authorization,
          body: (text === "" ? {} : JSON.parse(text)) as Record<string, unknown>,
        };
        this.calls.push(call);
        const answer = this.#answer(call);
        if (answer === undefined) response.writeHead(204).end();
        else response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
        for (const wake of [...this.#waiting]) wake();
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #answer({ method, path, body }: DiscordCall): unknown {
    const startThread = /^\/channels\/(\d+)\/messages\/(\d+)\/threads$/.exec(path);
    if (method === "POST" && startThread) {
      // A thread started from a message has the message's id.
      const [, parentId = "", messageId = ""] = startThread;
      this.#threads.set(messageId, parentId);
      return { id: messageId, name: body.name, type: PUBLIC_THREAD, parent_id: parentId };
    }
    const post = /^\/channels\/(\d+)\/messages$/.exec(path);
    if (method === "POST" && post) {
      const message = { id: String(this.#nextId++), channelId: post[1] ?? "", text: "", buttons: [] };
      this.#messages.set(message.id, message);
      this.#apply(message, body);
      return this.#wire(message);
    }
    const edit = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path);
    if (method === "PATCH" && edit) {
      const message = this.#messages.get(edit[2] ?? "");
      if (!message) return undefined;
      this.#apply(message, body);
      return this.#wire(message);
    }
    const channel = /^\/channels\/(\d+)$/.exec(path);
    if (method === "GET" && channel) {
      const id = channel[1] ?? "";
      const parentId = this.#threads.get(id);
      return parentId === undefined ? { id, type: 0 } : { id, type: PUBLIC_THREAD, parent_id: parentId };
    }
    return undefined;
  }

  /** A posted or edited message's body, on the message as Discord keeps it. */
  #apply(message: PostedMessage, body: Record<string, unknown>): void {
    const [embed] = (body.embeds as { description?: string }[] | undefined) ?? [];
    const content = typeof body.content === "string" ? body.content : "";
    message.text = content !== "" ? content : (embed?.description ?? message.text);
    if (body.components !== undefined) {
      message.buttons = (body.components as ActionRow[]).flatMap((row) =>
        (row.components ?? []).map((button) => ({ label: String(button.label), customId: String(button.custom_id) })),
      );
    }
  }

  #wire(message: PostedMessage) {
    return {
      id: message.id,
      channel_id: message.channelId,
      type: 0,
      content: message.text,
      author: { id: this.applicationId, username: "helper", global_name: null, discriminator: "0", avatar: null, bot: true },
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      mentions: [],
      attachments: [],
      embeds: [],
    };
  }

  /** The bot's messages in a channel or thread as they read now. */
  textOf(channelId: string): string[] {
    return this.messagesOf(channelId).map((message) => message.text);
  }

  messagesOf(channelId: string): PostedMessage[] {
    return [...this.#messages.values()].filter((message) => message.channelId === channelId);
  }

  /** The threads the bot started: thread id to parent channel id. */
  get threads(): ReadonlyMap<string, string> {
    return this.#threads;
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
          new Error(
            `Discord stand-in: still waiting for ${what} after ${ms} ms; calls: ${JSON.stringify(this.calls.map((call) => [call.method, call.path, call.body]))}`,
          ),
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
