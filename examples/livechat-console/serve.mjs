// A static server for this folder (no dependency): the page an agent opens.
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";

const files = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/console.js": ["console.js", "text/javascript; charset=utf-8"],
  "/console.css": ["console.css", "text/css; charset=utf-8"],
};
const port = Number(process.env.PORT ?? 5174);

const server = createServer(async (request, response) => {
  const file = files[new URL(request.url ?? "/", "http://x").pathname];
  if (!file) {
    response.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found");
    return;
  }
  response.writeHead(200, { "content-type": file[1], "cache-control": "no-store" }).end(await readFile(new URL(file[0], import.meta.url)));
});
server.listen(port, process.env.HOST ?? "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
