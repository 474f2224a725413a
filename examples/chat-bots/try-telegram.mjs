// Talk to the example's Telegram bot from this terminal, without a Telegram account: a small
// stand-in of Telegram's Bot API on 127.0.0.1 takes the bot's calls, server.mjs runs against it
// (TELEGRAM_API_URL) with the real @chat-adapter/telegram, and each line you type is delivered
// to the bot's webhook as Telegram delivers an update, with the secret token.
//   node try-telegram.mjs        (then type; Ctrl-D to stop)
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const BOT_TOKEN = "100:local-try";
const SECRET_TOKEN = randomBytes(16).toString("hex");
const CHAT_ID = 1;

// The Bot API as the adapter calls it: the bot's messages are printed once written (a reply is
// posted as "...", then edited with the flow's text).
let nextMessageId = 1;
const api = createServer((request, response) => {
  let body = "";
  request.on("data", (chunk) => {
    body += chunk;
  });
  request.on("end", () => {
    const method = /\/bot[^/]+\/(\w+)/.exec(request.url ?? "")?.[1];
    const call = body === "" ? {} : JSON.parse(body);
    const text = call.text ?? call.rich_message?.markdown ?? "";
    let result = true;
    if (method === "getMe") result = { id: 100, is_bot: true, first_name: "Reverse", username: "reverse_bot" };
    if (method === "sendMessage" || method === "editMessageText") {
      if (text !== "..." && text !== "") console.log(`bot: ${text.replaceAll("\n", "\n     ")}`);
      const messageId = method === "sendMessage" ? nextMessageId++ : call.message_id;
      result = { message_id: messageId, date: Math.floor(Date.now() / 1000), chat: { id: CHAT_ID, type: "private" }, text };
    }
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, result }));
  });
});
api.listen(0, "127.0.0.1");
await once(api, "listening");

const bots = spawn(process.execPath, ["server.mjs"], {
  cwd: dirname(fileURLToPath(import.meta.url)),
  stdio: ["ignore", "pipe", "inherit"],
  env: {
    ...process.env,
    PORT: "0",
    CHANNELKIT_DB: join(mkdtempSync(join(tmpdir(), "chat-bots-try-")), "try.db"),
    CHANNELKIT_SECRET_KEY: process.env.CHANNELKIT_SECRET_KEY ?? randomBytes(32).toString("hex"),
    TELEGRAM_BOT_TOKEN: BOT_TOKEN,
    TELEGRAM_SECRET_TOKEN: SECRET_TOKEN,
    TELEGRAM_API_URL: `http://127.0.0.1:${api.address().port}`,
    SLACK_BOT_TOKEN: "",
  },
});
// The webhook URL the example prints for its Telegram channel.
const webhook = await new Promise((resolve, reject) => {
  let output = "";
  bots.stdout.on("data", (chunk) => {
    output += chunk;
    const url = /^Telegram bot \(channel [\w-]+\): telegram webhook (\S+)$/m.exec(output)?.[1];
    if (url && output.includes("listening on")) resolve(url);
  });
  bots.once("exit", () => reject(new Error(`server.mjs stopped:\n${output}`)));
});
console.log(`The bot's webhook is ${webhook}. Type a message (Ctrl-D to stop).`);

let updateId = 1;
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "") continue;
  const update = {
    update_id: updateId,
    message: {
      message_id: updateId++,
      from: { id: CHAT_ID, is_bot: false, first_name: "You" },
      chat: { id: CHAT_ID, type: "private" },
      date: Math.floor(Date.now() / 1000),
      text: line,
    },
  };
  const delivered = await fetch(webhook, {
    method: "POST",
    headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
    body: JSON.stringify(update),
  });
  if (!delivered.ok) console.log(`(the webhook answered ${delivered.status}: ${await delivered.text()})`);
}
bots.kill("SIGTERM");
await once(bots, "exit");
api.close();
