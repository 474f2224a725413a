// Runs examples/workers/worker.ts locally in workerd (miniflare), on a D1 database kept in
// examples/workers/.state (or CHANNELKIT_D1_DIR): bundles the Worker with esbuild as wrangler would, migrates D1,
// creates a demo tenant and channel on the first start (printing its key once), and serves
// on 127.0.0.1. From the repository root: node examples/workers/run.mjs
import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { d1 } from "@channelkit/kysely/d1";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

const here = new URL(".", import.meta.url).pathname;
const secretKey = process.env.CHANNELKIT_SECRET_KEY;
const { outputFiles } = await build({
  entryPoints: [`${here}worker.ts`],
  bundle: true,
  write: false,
  format: "esm",
  platform: "neutral",
  conditions: ["workerd", "worker", "browser"],
  mainFields: ["module", "main"],
});
const mf = new Miniflare({
  modules: true,
  script: outputFiles[0].text,
  compatibilityDate: "2026-04-01",
  compatibilityFlags: ["enable_request_signal"],
  d1Databases: ["DB"],
  d1Persist: process.env.CHANNELKIT_D1_DIR ?? `${here}.state/d1`,
  bindings: secretKey ? { CHANNELKIT_SECRET_KEY: secretKey } : {},
  cf: false, // no Request.cf from Cloudflare's API: nothing leaves this machine
  host: process.env.HOST ?? "127.0.0.1",
  port: Number(process.env.PORT ?? 3000),
});
const url = await mf.ready;

// The same D1 database from Node, through miniflare: migrate it, and provision the demo once.
const storage = d1(await mf.getD1Database("DB"), { warn: () => undefined });
await storage.migrate();
const admin = (await createChannelService({ storage, flows: demoFlows, secretKey, logger: { warn() {}, error: console.error } })).admin;
if ((await admin.listTenants()).tenants.length === 0) {
  const { tenant } = await admin.createTenant({ name: "Demo" });
  const { api_key } = await admin.createChannel({ tenantId: tenant.id, flow: "echo" });
  console.log(`demo channel created; its key, shown once: ${api_key}`);
  console.log(
    `curl -s ${url.origin}/public/v1/api/execute -H 'Authorization: Bearer ${api_key}' -H 'Content-Type: application/json' -d '{"payload":"Hello, channelkit!"}'`,
  );
}
console.log(`listening on ${url.origin}`);
process.on("SIGINT", () => mf.dispose().then(() => process.exit(0)));
process.on("SIGTERM", () => mf.dispose().then(() => process.exit(0)));
