/**
 * The floor of the Web adapter (`npm run bench -- --floor`): the same trivial JSON echo
 * served by plain node:http and by a Web handler behind `toNodeHandler`. The gap between the
 * two is what a Web Request and Response cost on this Node version before channelkit does
 * any work of its own.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { json } from "@channelkit/core";
import { toNodeHandler } from "@channelkit/node";
import { listenToParent, toParent } from "./shared.js";

const web = process.env.BENCH_FLOOR === "web";

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

const handler = toNodeHandler({
  async handler(request: Request) {
    const { payload } = (await request.json()) as { payload: string };
    return json({ echo: payload });
  },
});

const server = createServer(web ? handler : plain);
server.listen(0, "127.0.0.1", () => {
  listenToParent(async () => {
    server.close();
    server.closeAllConnections();
  });
  toParent({ type: "ready", port: (server.address() as AddressInfo).port });
});
