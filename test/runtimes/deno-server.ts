import { type KyselyStorage, postgres } from "@channelkit/kysely";
import { nodeSqlite } from "@channelkit/kysely/node-sqlite";
import { kyselyKeyExpiry, type TargetOptions, testApp } from "./service.js";

/*
 * The contract suite's server on Deno: `Deno.serve` with the service's Web handler, on the
 * SQLite of Deno's `node:sqlite` (`nodeSqlite`) or on Postgres (`pg` from node_modules).
 * Started by deno.test.ts:
 *   CHANNELKIT_TEST_DB=<file or postgres:// URL> CHANNELKIT_TEST_CONTROL=<token> deno run -A test/runtimes/deno-server.ts
 * It prints `listening on <url>` once it serves, and stops on SIGTERM.
 */

interface DenoServer {
  shutdown(): Promise<void>;
}
declare const Deno: {
  env: { get(name: string): string | undefined };
  serve(
    options: { hostname: string; port: number; onListen(address: { port: number }): void },
    handler: (request: Request, info: { remoteAddr: { hostname: string } }) => Promise<Response>,
  ): DenoServer;
  addSignalListener(signal: "SIGTERM", listener: () => void): void;
  exit(code: number): never;
};

const location = Deno.env.get("CHANNELKIT_TEST_DB") ?? ":memory:";
const options = JSON.parse(Deno.env.get("CHANNELKIT_TEST_OPTIONS") ?? "{}") as TargetOptions;
const storage: KyselyStorage = /^postgres(ql)?:/.test(location) ? postgres(location) : nodeSqlite(location);
await storage.migrate();
const app = await testApp(storage, options, Deno.env.get("CHANNELKIT_TEST_CONTROL") ?? "", kyselyKeyExpiry(storage));

const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: ({ port }) => console.log(`listening on http://127.0.0.1:${port}`) }, (request, info) =>
  app.fetch(request, { clientAddress: info.remoteAddr.hostname }),
);

Deno.addSignalListener("SIGTERM", async () => {
  await server.shutdown();
  await app.service.close();
  Deno.exit(0);
});
