/**
 * The floor of the Node adapter (`npm run bench -- --floor`): the same trivial JSON echo
 * served by plain node:http, by a Web handler behind `toNodeHandler` (a Web Request and
 * Response), and by a `dispatch` answering a Reply (what a channel service does behind
 * @channelkit/node). The gaps are what each path costs before channelkit does any work.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type IncomingRequest, type Reply, toResponse } from "@channelkit/core/adapter";
import { toNodeHandler } from "@channelkit/node";
import { type FloorVariant, listenToParent, toParent } from "./shared.js";

const variant = (process.env.BENCH_FLOOR ?? "plain") as FloorVariant;

function plain(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const { payload } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { payload: string };
    const text = JSON.stringify({ echo: payload });
    res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) });
    res.end(text);
  });
}

async function echo(request: IncomingRequest): Promise<Reply> {
  const { payload } = JSON.parse(new TextDecoder().decode(await request.arrayBuffer())) as { payload: string };
  // A JSON reply as core's routes build one: the body one string.
  return { status: 200, headers: { "content-type": "application/json; charset=utf-8" }, body: JSON.stringify({ echo: payload }) };
}

const handlers = {
  plain,
  web: toNodeHandler({ handler: async (request: Request) => toResponse(await echo(request)) }),
  reply: toNodeHandler({ handler: async (request: Request) => toResponse(await echo(request)), dispatch: echo }),
};

const server = createServer(handlers[variant]);
server.listen(0, "127.0.0.1", () => {
  listenToParent(async () => {
    server.close();
    server.closeAllConnections();
  });
  toParent({ type: "ready", port: (server.address() as AddressInfo).port });
});
