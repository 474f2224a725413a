import { d1, type D1Binding } from "@channelkit/kysely/d1";
import { kyselyKeyExpiry, type TargetOptions, type TestApp, testApp } from "./service.js";

/*
 * The contract suite's server as a Cloudflare Worker: its `fetch` is the service's Web
 * handler, on D1 (`d1(env.DB)`). Bundled by workers.test.ts with esbuild for workerd and run
 * there through miniflare, on 127.0.0.1. The service is made by the isolate's first request
 * (a Worker has no start-up hook with its bindings) and kept for the next ones.
 */

interface Env {
  DB: D1Binding;
  /** The suite's options for this target, as JSON. */
  OPTIONS: string;
  /** The token of the control route (service.ts). */
  CONTROL: string;
  /** Set to log the service's warnings and errors (the suite's failures are on purpose). */
  LOG?: string;
}

let app: Promise<TestApp> | undefined;

async function start(env: Env): Promise<TestApp> {
  const storage = d1(env.DB, { warn: () => undefined });
  await storage.migrate();
  return testApp(storage, JSON.parse(env.OPTIONS) as TargetOptions, env.CONTROL, kyselyKeyExpiry(storage), env.LOG ? console : undefined);
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    app ??= start(env).catch((error) => {
      app = undefined;
      throw error;
    });
    const response = await (await app).fetch(request, { clientAddress: request.headers.get("CF-Connecting-IP") ?? undefined });
    // A body refused unread (413 on its Content-Length) is read to its end before the answer
    // goes: workerd run locally resets the connection when it answers while the client still
    // writes, and the client sees ECONNRESET instead of the answer (Cloudflare's edge in front
    // of a deployed Worker reads it). Read after the answer (waitUntil), it still raced.
    if (request.body && !request.bodyUsed) await request.body.pipeTo(new WritableStream()).catch(() => undefined);
    return response;
  },
};
