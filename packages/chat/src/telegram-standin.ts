import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A Bot API call the adapter made. */
export interface BotCall {
  token: string;
  method: string;
  body: Record<string, unknown>;
}

/**
 * Telegram's Bot API as the adapter sees it, on 127.0.0.1 (`api_url`): `getMe`, then the
 * messages the bot sends and edits. Records every call; `textOf(chatId)` is what a Telegram
 * user would read in that chat now, message by message.
 */
export class TelegramStandIn {
  readonly calls: BotCall[] = [];
  readonly #messages = new Map<number, { chatId: number; text: string; keyboard: unknown }>();
  readonly #waiting = new Set<() => void>();
  #nextId = 1000;
  #server: Server | undefined;
  url = "";

  async start(): Promise<void> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const [, token = "", method = ""] = /^\/bot([^/]+)\/(\w+)/.exec(request.url ?? "") ?? [];
        const text = Buffer.concat(chunks).toString();
        const body = (text === "" ? {} : JSON.parse(text)) as Record<string, unknown>;
        this.calls.push({ token, method, body });
        response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, result: this.#answer(method, body) }));
        for (const wake of [...this.#waiting]) wake();
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #answer(method: string, body: Record<string, unknown>): unknown {
    const chatId = Number(body.chat_id);
    // The adapter sends plain `text`, or Markdown as `rich_message.markdown`.
    const text = String(body.text ?? (body.rich_message as { markdown?: unknown } | undefined)?.markdown ?? "");
    if (method === "getMe") return { id: 777, is_bot: true, first_name: "Helper", username: "helper_bot" };
    if (method === "sendMessage") {
      const id = this.#nextId++;
      this.#messages.set(id, { chatId, text, keyboard: body.reply_markup });
      return {
        message_id: id,
        date: Math.floor(Date.now() / 1000),
        chat: { id: chatId, type: "private" },
        text,
        from: { id: 777, is_bot: true, first_name: "Helper" },
      };
    }
    if (method === "editMessageText") {
      const id = Number(body.message_id);
      const message = this.#messages.get(id);
      if (message) Object.assign(message, { text, keyboard: body.reply_markup });
      return { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type: "private" }, text };
    }
    return true;
  }

  /** The bot's messages in a chat as they read now. */
  textOf(chatId: number): string[] {
    return [...this.#messages.values()].filter((message) => message.chatId === chatId).map((message) => message.text);
  }

  /** The bot's messages in a chat with their inline keyboards (`reply_markup`), as they read now. */
  messagesOf(chatId: number): { id: number; text: string; keyboard: unknown }[] {
    return [...this.#messages]
      .filter(([, message]) => message.chatId === chatId)
      .map(([id, message]) => ({ id, text: message.text, keyboard: message.keyboard }));
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
            `Telegram stand-in: still waiting for ${what} after ${ms} ms; calls: ${JSON.stringify(this.calls.map((call) => [call.method, call.body]))}`,
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
