import { bunSqlite } from "@channelkit/kysely/bun-sqlite";
import { type KyselyStorage, postgres } from "@channelkit/kysely";
import { kyselyKeyExpiry, type TargetOptions, testApp } from "./service.js";

/*
 * The contract suite's server on Bun: `Bun.serve` with the service's Web handler, on Bun's
 * own SQLite (`bunSqlite`) or on Postgres (`pg`). Started by runtimes.test.ts:
 *   CHANNELKIT_TEST_DB=<file or postgres:// URL> CHANNELKIT_TEST_CONTROL=<token> bun test/runtimes/bun-server.ts
 * It prints `listening on <url>` once it serves, and stops on SIGTERM.
 */

interface BunServer {
  readonly port: number;
  requestIP(request: Request): { address: string } | null;
  stop(closeActiveConnections?: boolean): Promise<void> | void;
}
declare const Bun: {
  serve(options: { hostname: string; port: number; idleTimeout?: number; fetch(request: Request, server: BunServer): Promise<Response> }): BunServer;
};

const location = process.env.CHANNELKIT_TEST_DB ?? ":memory:";
const options = JSON.parse(process.env.CHANNELKIT_TEST_OPTIONS ?? "{}") as TargetOptions;
const storage: KyselyStorage = /^postgres(ql)?:/.test(location) ? postgres(location) : bunSqlite(location);
await storage.migrate();
const app = await testApp(storage, options, process.env.CHANNELKIT_TEST_CONTROL ?? "", kyselyKeyExpiry(storage));

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  // Streams that wait (a turn, a live chat) must not be cut by Bun's 10 s idle timeout.
  idleTimeout: 0,
  fetch: (request, server) => app.fetch(request, { clientAddress: server.requestIP(request)?.address }),
});
console.log(`listening on http://127.0.0.1:${server.port}`);

process.on("SIGTERM", async () => {
  await server.stop(true);
  await app.service.close();
  process.exit(0);
});
