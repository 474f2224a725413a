/**
 * Every route, fuzzed with fast-check over real HTTP on 127.0.0.1: random methods, paths,
 * headers (Authorization, Origin, Content-Type, X-Service-Signature, X-Tenant-ID,
 * Last-Event-ID), query strings and bodies (malformed JSON, deep nesting, every JSON type in
 * every field, huge and astral strings, lone surrogates, bytes that are not UTF-8), against
 * a service as `channelkit serve` mounts it (admin routes, the agent inbox) on SQLite. The
 * properties: no 5xx, an error body always in the route's documented format, the server
 * still answers afterwards. `CHANNELKIT_FUZZ_RUNS` sets the number of cases (`npm run fuzz --
 * --runs 100000`); a few thousand run in `npm test`.
 */
import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminApi, type ChannelService, createChannelService, liveChatInbox, signRequestBody } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import fc from "fast-check";
import { SignJWT } from "jose";
import { OpenApiConformance } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const RUNS = Number(process.env.CHANNELKIT_FUZZ_RUNS ?? 3000);
const SEED = process.env.CHANNELKIT_FUZZ_SEED === undefined ? undefined : Number(process.env.CHANNELKIT_FUZZ_SEED);
const ADMIN_SECRET = "fuzz-admin-secret-0123456789abcdef0123";
const ORIGIN = "https://shop.example";
const db = join(tmpdir(), `channelkit-fuzz-${randomUUID()}.db`);

let service: ChannelService;
let server: RunningServer;
/** What the fuzzer may use as a valid value, beside garbage. */
const known = {
  keys: [] as string[],
  tenants: [] as string[],
  channels: [] as string[],
  clientIds: [] as string[],
  conversations: [] as string[],
  secrets: [] as string[],
  tokens: [] as string[],
};
const errors: unknown[][] = [];
const conformance = new OpenApiConformance();
const outcomes = new Map<number, number>();

beforeAll(async () => {
  const storage = sqlite(db);
  await storage.migrate();
  service = await createChannelService({
    storage,
    flows: demoFlows,
    secretKey: "ab".repeat(32),
    logger: { warn: () => undefined, error: (...args) => void errors.push(args) },
    plugins: [adminApi({ secret: ADMIN_SECRET })],
    livechat: liveChatInbox({ secret: ADMIN_SECRET }),
  });
  const { tenant } = await service.admin.createTenant({ name: "Fuzz" });
  known.tenants.push(tenant.id);
  for (const input of [
    { flow: "echo" },
    { flow: "handover", mode: "public" as const, allowedOrigins: [ORIGIN] },
    { flow: "echo", requireSignature: true },
    { flow: "echo", type: "webhook" as const, languages: ["en_US", "fr_FR"] },
    // Resumable streams: runs recorded, followed and cancelled.
    { flow: "echo", mode: "public" as const, allowedOrigins: [ORIGIN], resumableStreams: true },
  ]) {
    const created = await service.admin.createChannel({ tenantId: tenant.id, ...input });
    known.keys.push(created.api_key);
    known.channels.push(created.channel.id);
    if (created.signing_secret) known.secrets.push(created.signing_secret);
    if ("client_id" in created.channel && created.channel.client_id) known.clientIds.push(created.channel.client_id);
  }
  known.tokens.push(
    await new SignJWT({ tenant_ids: [tenant.id] })
      .setProtectedHeader({ alg: "HS256" })
      .setSubject("fuzz")
      .setExpirationTime("2h")
      .sign(new TextEncoder().encode(ADMIN_SECRET)),
  );
  server = await serve(service, { port: 0 });
  // Conversations to aim at: one of the echo channel, one handed over on the public channel.
  for (const [key, origin] of [
    [known.keys[0], undefined],
    [known.keys[1], ORIGIN],
  ] as const) {
    const response = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...(origin ? { origin } : {}) },
      body: JSON.stringify({ payload: "hello" }),
    });
    known.conversations.push(((await response.json()) as { conversation_id: string }).conversation_id);
  }
}, 60_000);

afterAll(async () => {
  server?.server.closeAllConnections();
  await server?.close();
  await service?.close();
  await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
});

/** A header value fetch can send: printable, no line breaks. */
const headerText = fc.string({ maxLength: 60 }).map((text) => text.replace(/[^\x20-\x7e]/g, "x"));
const pick = <T>(values: () => T[]) => fc.constant(null).chain(() => fc.constantFrom(...values()));

const idParam = fc.oneof(
  pick(() => known.conversations),
  pick(() => known.conversations).map((id) => id.toUpperCase()),
  pick(() => known.channels),
  pick(() => known.clientIds),
  fc.uuid(),
  fc.string({ maxLength: 40 }),
  fc.constantFrom("", "..", "%2F", "%E0%A4%A", "null", " "),
);

/** A route of the service with its parameters filled in (its own method), or a path of no route. */
const target = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .constant(null)
      .chain(() =>
        fc.oneof(
          { weight: 5, arbitrary: fc.constantFrom(...service.routes.filter((route) => route.method !== "OPTIONS")) },
          { weight: 1, arbitrary: fc.constantFrom(...service.routes) },
        ),
      )
      .chain((route) =>
        fc.array(idParam, { minLength: 3, maxLength: 3 }).map((ids) => {
          let i = 0;
          return { method: route.method, path: route.path.replace(/:[a-z_]+/g, () => encodeURIComponent(ids[i++] as string)) };
        }),
      ),
  },
  { weight: 1, arbitrary: fc.webPath().map((path) => ({ method: "GET", path: path.startsWith("/") ? path : `/${path}` })) },
);

const query = fc
  .array(
    fc.tuple(
      fc.constantFrom("limit", "token_budget", "after", "mode", "locale", "channel_id", "cursor", "x"),
      fc.oneof(fc.integer({ min: -5, max: 300 }).map(String), fc.string({ maxLength: 20 })),
    ),
    { maxLength: 3 },
  )
  .map((pairs) => (pairs.length === 0 ? "" : `?${new URLSearchParams(pairs).toString()}`));

const deep = (depth: number) => `{"payload":"hi","metadata":{"a":${"[".repeat(depth)}${"]".repeat(depth)}}}`;
const jsonBody = fc.oneof(
  fc.json(),
  fc
    .record(
      {
        payload: fc.oneof(
          fc.string(),
          fc.string({ unit: "grapheme", maxLength: 50 }),
          fc.anything(),
          fc.constant("x".repeat(10_001)),
          fc.constant("😀".repeat(10_000)),
        ),
        conversation_id: fc.oneof(
          pick(() => known.conversations),
          fc.anything(),
        ),
        metadata: fc.anything(),
        stream: fc.anything(),
        userInput: fc.anything(),
        conversationId: fc.oneof(
          pick(() => known.conversations),
          fc.anything(),
        ),
        language: fc.oneof(fc.constantFrom("en_US", "fr_FR", "xx"), fc.anything()),
        content: fc.anything(),
        sender: fc.anything(),
        messages: fc.anything(),
        id: fc.anything(),
        livechat: fc.anything(),
        widget: fc.anything(),
        config: fc.anything(),
        state: fc.anything(),
      },
      { requiredKeys: [] },
    )
    .map((value) => JSON.stringify(value)),
);
const body = fc.oneof(
  { weight: 6, arbitrary: jsonBody.map((text) => Buffer.from(text)) },
  { weight: 1, arbitrary: fc.integer({ min: 30, max: 5000 }).map((depth) => Buffer.from(deep(depth))) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('{"payload":"a\\ud800b"}', '{"payload":"\\udfff"}', '{"payload":', "[]", "null", '"x"', "{}", "")
      .map((text) => Buffer.from(text)),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)) },
);

const headers = fc.record(
  {
    authorization: fc.oneof(
      { weight: 5, arbitrary: pick(() => known.keys).map((key) => `Bearer ${key}`) },
      { weight: 2, arbitrary: pick(() => known.tokens).map((token) => `Bearer ${token}`) },
      { weight: 1, arbitrary: headerText.map((text) => `Bearer ${text}`) },
      { weight: 1, arbitrary: headerText },
    ),
    origin: fc.oneof({ weight: 4, arbitrary: fc.constant(ORIGIN) }, { weight: 1, arbitrary: fc.constant("null") }, { weight: 1, arbitrary: headerText }),
    "content-type": fc.oneof(
      { weight: 6, arbitrary: fc.constant("application/json") },
      { weight: 1, arbitrary: fc.constant("application/json; charset=utf-8") },
      { weight: 1, arbitrary: headerText },
    ),
    "x-service-signature": fc.oneof(headerText, fc.constant("t=1,v1=00")),
    "x-tenant-id": fc.oneof(
      pick(() => known.tenants),
      headerText,
    ),
    "last-event-id": fc.oneof(fc.integer({ min: -3, max: 50 }).map(String), headerText),
  },
  { requiredKeys: ["authorization", "content-type", "x-tenant-id"] },
);

const request = fc.record({
  method: fc.oneof(
    { weight: 6, arbitrary: fc.constant("") },
    { weight: 1, arbitrary: fc.constantFrom("GET", "POST", "PATCH", "OPTIONS", "PUT", "DELETE", "HEAD") },
  ),
  target,
  query,
  headers,
  body,
  signBody: fc.boolean(),
});

/** Routes whose unknown conversation is the history's `{ detail }` 404. */
const DETAIL_404 = /^\/public\/(v1\/api\/conversations\/[^/]+\/(messages|events|livechat\/cancel|stream|cancel)|widget\/chat\/[^/]+\/(stream|cancel))$/;

describe("fuzzing every route", () => {
  it(`${RUNS} random requests: no 5xx, every error in its route's format, nothing logged`, async () => {
    await fc.assert(
      fc.asyncProperty(request, async (input) => {
        const method = input.method || input.target.method;
        const path = input.target.path;
        const init: RequestInit & { headers: Record<string, string> } = { method, headers: { ...input.headers } };
        if (method !== "GET" && method !== "HEAD") {
          init.body = input.body;
          if (input.signBody && known.secrets[0]) init.headers["x-service-signature"] = await signRequestBody(known.secrets[0], input.body);
        }
        const controller = new AbortController();
        const response = await fetch(`${server.url}${path}${input.query}`, { ...init, signal: controller.signal });
        outcomes.set(response.status, (outcomes.get(response.status) ?? 0) + 1);
        expect(response.status, `${method} ${path}`).toBeLessThan(500);
        const type = response.headers.get("content-type") ?? "";
        if (type.startsWith("text/event-stream")) {
          // A stream or a subscription: its opening is enough, then the client goes away.
          controller.abort();
          return;
        }
        // Every answer as the OpenAPI document (docs/openapi.json) describes it.
        const violations: string[] = [];
        // The path as sent: fetch resolves `..` and `.` segments.
        const sent = new URL(response.url).pathname;
        const checked = await conformance.inspect(method, sent, response, (violation) => violations.push(violation));
        expect(violations, `${method} ${path}${input.query} ${response.status}`).toEqual([]);
        const text = await checked.text();
        if (response.status < 400 || method === "HEAD") return;
        expect(type, `${method} ${path} ${response.status}: ${text}`).toMatch(/^application\/json/);
        const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown }; detail?: unknown };
        // The router reads empty segments as absent (`//` as `/`), as it routes.
        if (response.status === 404 && DETAIL_404.test(path.replace(/\/{2,}/g, "/")) && typeof parsed.detail === "string") return;
        expect(typeof parsed.error?.code, `${method} ${path}: ${text}`).toBe("string");
        expect(typeof parsed.error?.message, text).toBe("string");
      }),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }), endOnFailure: true },
    );
    expect(errors).toEqual([]);
    // Still answering, as a client expects (on a new channel: the fuzzer may have rotated keys, archived channels).
    const fresh = await service.admin.createChannel({ tenantId: known.tenants[0] as string, flow: "echo" });
    const after = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${fresh.api_key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "still here" }),
    });
    expect(after.status).toBe(200);
    if (process.env.CHANNELKIT_FUZZ_REPORT) console.log(`fuzz: ${RUNS} cases, statuses ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`);
  }, 600_000);
});
