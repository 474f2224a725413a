import { join } from "node:path";
import { type ContractSuiteOptions, defineContractSuite } from "../../packages/testkit/src/index.js";
import { build } from "esbuild";
import { Log, LogLevel, Miniflare } from "miniflare";
import { ROOT } from "./binaries.js";
import { remoteTarget } from "./remote.js";

/*
 * The HTTP contract suite against a Cloudflare Worker whose `fetch` is the service, on D1
 * (worker.ts), run by workerd through miniflare on 127.0.0.1: the Worker bundled with esbuild
 * for workerd from the built packages (`npm run build` first; `npm test` does), without
 * `nodejs_compat`, so no Node module can hide in it. Each target start is a new Worker on a
 * new, empty in-memory D1 database.
 *
 * The suite's groups as defineContractSuite declares them, less those a Worker cannot pass,
 * printed with the reason (docs/runtimes.md has the details):
 */
const NOT_ON_WORKERS = {
  "client disconnect":
    "workerd ends a request's work when its client disconnects: the run is not stored (it stays running until the conversation's next run takes its lapsed turn over)",
  turns: "its cases cancel a run by disconnecting its client, which a Worker does not store (above)",
  "resumable streams": "a run cannot outlive its request, and a reader's request cannot read what another request's run writes in memory",
  "idempotent requests": "two of its cases need a run whose client left to be stored or to go on",
  "leaving clients": "the suite holds a service through its storage, which it cannot wrap in a Worker (and a Worker stores no run whose client left, above)",
  "live chat": "the subscription and the inbox feed are pushed from another request's work, which a Worker forbids (I/O of another request)",
} satisfies ContractSuiteOptions["omit"];

/** The Worker as one ES module, as wrangler would bundle it. */
async function bundleWorker(): Promise<string> {
  const result = await build({
    entryPoints: [join(ROOT, "test/runtimes/worker.ts")],
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    logLevel: "silent",
  });
  return (result.outputFiles[0] as { text: string }).text;
}

const script = bundleWorker();

const target = remoteTarget({
  name: "Cloudflare Worker (workerd) + D1",
  async start(options, token) {
    const mf = new Miniflare({
      modules: true,
      script: await script,
      compatibilityDate: "2026-04-01",
      // request.signal aborts when the client disconnects (the service follows it).
      compatibilityFlags: ["enable_request_signal"],
      d1Databases: ["DB"],
      bindings: { OPTIONS: JSON.stringify(options), CONTROL: token, ...(process.env.CHANNELKIT_TEST_LOG ? { LOG: "1" } : {}) },
      // No Request.cf from Cloudflare's API: nothing leaves this machine.
      cf: false,
      ...(process.env.CHANNELKIT_TEST_LOG ? { log: new Log(LogLevel.DEBUG) } : {}),
      host: "127.0.0.1",
      port: 0,
    });
    const url = (await mf.ready).origin;
    return { url, stop: () => mf.dispose() };
  },
});

defineContractSuite(target, { omit: NOT_ON_WORKERS });
