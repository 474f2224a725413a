import { type ChannelAdmin, type ChannelPlugin, type ChannelService, defineRoute, signRequestBody } from "@channelkit/core";
import { expect } from "vitest";
import { EXECUTE_PATH } from "./client.js";

/**
 * An execute body as a hand-written client may send it: keys out of order, odd spacing, a
 * newline, escaped and non-ASCII text. Any re-serialization (a host's JSON parser, then
 * `JSON.stringify`) changes its bytes.
 */
export const UNUSUAL_SIGNED_BODY = '{ "stream" :false ,\n  "payload":"Signed  \\u0041 héllo 😀",   "metadata" : { "b":1,"a" : [ 2 ,1 ] } }';

/**
 * Checks that an adapter hands the service the exact raw body bytes, whatever body parser
 * the host installed: on a channel created with `requireSignature`, a request signed over
 * {@link UNUSUAL_SIGNED_BODY} runs, and the same JSON re-serialized under the same signature
 * is refused with 401 `invalid_signature`.
 *
 * @param target - `url`: where the routes are served (the mount prefix included); `admin`: the service's admin API.
 */
export async function expectExactSignedBody(target: { url: string; admin: ChannelAdmin }): Promise<void> {
  const { tenant } = await target.admin.createTenant({ name: "adapter" });
  const created = await target.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
  const secret = created.signing_secret;
  if (secret === null) throw new Error("a channel created with requireSignature has a signing secret");
  const signature = await signRequestBody(secret, UNUSUAL_SIGNED_BODY);
  const send = (body: string) =>
    fetch(target.url + EXECUTE_PATH, {
      method: "POST",
      headers: { authorization: `Bearer ${created.api_key}`, "content-type": "application/json", "x-service-signature": signature },
      body,
    });

  const accepted = await send(UNUSUAL_SIGNED_BODY);
  const run = (await accepted.json()) as { status?: string; output?: { messages?: { content: string }[] } };
  expect(accepted.status, JSON.stringify(run)).toBe(200);
  expect(run.status).toBe("success");
  expect(run.output?.messages?.[0]?.content).toBe("Echo: Signed  A héllo 😀");

  const reserialized = await send(JSON.stringify(JSON.parse(UNUSUAL_SIGNED_BODY)));
  expect(reserialized.status).toBe(401);
  expect(((await reserialized.json()) as { error?: { code?: string } }).error?.code).toBe("invalid_signature");
}

/** A plugin answering `POST /ping` with `pong`: a short route for {@link expectPrefixBoundary}. */
export const pingPlugin: ChannelPlugin = {
  id: "ping",
  routes: [
    defineRoute({
      method: "POST",
      path: "/ping",
      auth: "none",
      doc: {
        operationId: "ping",
        summary: "Answers pong",
        tag: { name: "Test", description: "The testkit's ping plugin." },
        responses: { 200: { description: "`pong`, as text." } },
        errors: [],
      },
      handle: () => new Response("pong"),
    }),
  ],
};

/**
 * Checks that routes served under a prefix (the service's `basePath`, an adapter's mount
 * path, or both) are matched at a path-segment boundary: `<prefix>/public/v1/api/execute`
 * and `<prefix>/ping` run, while paths that merely begin with the prefix's characters
 * (`<prefix>ping`, `<prefix>public/v1/api/execute`, `<prefix>-x/...`) get exactly the answer
 * of any unknown path (the same 404, the same body) and reach no channelkit route.
 *
 * @param target - `origin`: the server's origin; `prefix`: where the routes are served, e.g.
 *   `/chat`; `admin`: the service's admin API. The service must have {@link pingPlugin}.
 */
export async function expectPrefixBoundary(target: { origin: string; prefix: string; admin: ChannelAdmin }): Promise<void> {
  const { origin, prefix } = target;
  if (!/^\/[^/]/.test(prefix) || prefix.endsWith("/")) throw new Error(`expectPrefixBoundary needs a prefix such as /chat, not ${JSON.stringify(prefix)}`);
  const { tenant } = await target.admin.createTenant({ name: "prefix" });
  const { api_key } = await target.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
  const post = (path: string) =>
    fetch(origin + path, {
      method: "POST",
      headers: { authorization: `Bearer ${api_key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hi" }),
    });

  const run = await post(`${prefix}${EXECUTE_PATH}`);
  const document = (await run.json()) as { status?: string };
  expect(run.status, JSON.stringify(document)).toBe(200);
  expect(document.status).toBe("success");
  expect(await (await post(`${prefix}/ping`)).text()).toBe("pong");

  const unknown = await post("/no-such-route");
  const notFound = { status: unknown.status, body: await unknown.text() };
  expect(notFound.status).toBe(404);
  for (const path of [`${prefix}ping`, `${prefix}${EXECUTE_PATH.slice(1)}`, `${prefix}-x/ping`, `${prefix}-x${EXECUTE_PATH}`]) {
    const response = await post(path);
    expect({ path, status: response.status, body: await response.text() }).toEqual({ path, ...notFound });
  }
}

/** A stand-in service streaming a large body on demand, to check an adapter's back-pressure. */
export interface StreamingProbe {
  /** One route, `GET /probe/stream`, answering `CHUNKS` chunks of 64 KiB produced on demand. */
  service: Pick<ChannelService, "handler" | "routes">;
  /**
   * Reads `url` (the probe route as served), first not at all until the producer stops
   * advancing, then to the end; fails unless the producer paused far from the end and
   * then delivered everything.
   */
  expectBackPressure(url: string): Promise<void>;
}

const CHUNK = 64 * 1024;
const CHUNKS = 640; // 40 MiB, if nothing held the producer back

/**
 * A {@link StreamingProbe}: mount its `service` with the adapter under test, then call
 * `expectBackPressure` with the URL of its route.
 *
 * @example
 * const probe = streamingProbe();
 * app.route("/x", channelkit(probe.service));
 * await probe.expectBackPressure(`${origin}/x/probe/stream`);
 */
export function streamingProbe(): StreamingProbe {
  let pulls = 0;
  const service: StreamingProbe["service"] = {
    routes: [{ method: "GET", path: "/probe/stream" }],
    async handler() {
      pulls = 0;
      const body = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            if (pulls === CHUNKS) return controller.close();
            pulls++;
            controller.enqueue(new Uint8Array(CHUNK).fill(pulls % 251));
          },
        },
        { highWaterMark: 0 },
      );
      return new Response(body, { headers: { "content-type": "application/octet-stream" } });
    },
  };
  return {
    service,
    async expectBackPressure(url) {
      const response = await fetch(url);
      expect(response.status).toBe(200);
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      // The client reads nothing: wait until the producer stops advancing (buffers full).
      let last = -1;
      let unchanged = 0;
      for (let waited = 0; unchanged < 6 && waited < 100; waited++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        unchanged = pulls === last ? unchanged + 1 : 0;
        last = pulls;
      }
      expect(pulls).toBeGreaterThan(0);
      expect(pulls, "the adapter kept pulling while the client read nothing").toBeLessThan(CHUNKS / 4);
      let bytes = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        bytes += value.byteLength;
      }
      expect(pulls).toBe(CHUNKS);
      expect(bytes).toBe(CHUNKS * CHUNK);
    },
  };
}
