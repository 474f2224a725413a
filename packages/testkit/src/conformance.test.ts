import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { OpenApiConformance } from "./conformance.js";

const checker = new OpenApiConformance();

const RUN_ID = "6f1c2b7e-4a8d-4c1e-9f3a-2b5d7e9a1c3f";
const CONVERSATION_ID = "0b8e5c1d-7f2a-4e6b-8c9d-1a3f5e7b9d2c";
const CHANNEL_ID = "3c5e7a9b-1d2f-4a6c-8e0b-2d4f6a8c0e1b";
const FLOW_ID = "9a7c5e3b-1f2d-5b4a-8c6e-0d2f4a6c8e1b";
const JSON_TYPE = { "content-type": "application/json; charset=utf-8" };
const STREAM = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
  "x-vercel-ai-ui-message-stream": "v1",
};

const runDocument = () => ({
  run_id: RUN_ID,
  conversation_id: CONVERSATION_ID,
  status: "success",
  output: {
    result: { echo: "hi" },
    error: null,
    messages: [{ role: "assistant", content: "Echo: hi" }],
    metadata: {
      channel_id: CHANNEL_ID,
      flow_id: FLOW_ID,
      flow_name: "echo",
      flow_version: null,
      environment: "prod",
      execution_order: ["echo"],
      started_at: "2025-01-01T00:00:00.000Z",
      completed_at: "2025-01-01T00:00:00.012Z",
      livechat_mode: null,
    },
  },
  usage: { total_nodes: 1, duration_ms: 12 },
  error: null,
});

async function check(method: string, path: string, response: Response): Promise<{ violations: string[]; response: Response }> {
  const violations: string[] = [];
  const checked = await checker.inspect(method, path, response, (violation) => violations.push(violation));
  return { violations, response: checked };
}

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { ...JSON_TYPE, ...headers } });
const frames = (...events: unknown[]) => events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join("");

describe("checking answers against the OpenAPI document", () => {
  it("passes an answer that conforms, and leaves its body to the caller", async () => {
    const { violations, response } = await check("POST", "/public/v1/api/execute", json(runDocument()));
    expect(violations).toEqual([]);
    expect(((await response.json()) as { run_id: string }).run_id).toBe(RUN_ID);
  });

  it("names the route, the status and what differs in a body", async () => {
    const { violations } = await check("POST", "/public/v1/api/execute", json({ ...runDocument(), status: "done", surprise: true }));
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatch(/^POST \/public\/v1\/api\/execute → 200: /);
    expect(violations[0]).toContain("body/status must be equal to one of the allowed values");
    expect(violations[0]).toContain("must NOT have additional properties");
  });

  it("refuses a status the route does not list, and an error code listed under another route only", async () => {
    expect((await check("POST", "/public/v1/api/execute", json({ error: { code: "x", message: "y" } }, 418))).violations[0]).toMatch(
      /^POST \/public\/v1\/api\/execute → 418: the document lists 200, .* not 418/,
    );
    const conflict = await check("GET", "/public/v1/api/conversations/x/messages", json({ error: { code: "livechat_conflict", message: "no" } }, 409));
    expect(conflict.violations[0]).toContain("body/error/code must be equal to one of the allowed values");
    const inactive = await check(
      "GET",
      "/public/v1/api/conversations/x/messages",
      json({ error: { code: "channel_inactive", message: "The channel is inactive." } }, 409),
    );
    expect(inactive.violations).toEqual([]);
  });

  it("refuses a route the document lacks unless it is the router's 404, and a method it lacks unless it is the router's 405", async () => {
    expect((await check("GET", "/public/v1/unknown", json({ ok: true }))).violations[0]).toContain("no path of the OpenAPI document matches it");
    expect((await check("GET", "/public/v1/unknown", json({ error: { code: "not_found", message: "No route matches this path." } }, 404))).violations).toEqual(
      [],
    );
    const notAllowed = json({ error: { code: "method_not_allowed", message: "This method is not allowed on this path." } }, 405, { allow: "OPTIONS, POST" });
    expect((await check("GET", "/public/v1/api/execute", notAllowed)).violations).toEqual([]);
    expect((await check("GET", "/public/v1/api/execute", json(runDocument()))).violations[0]).toContain(
      "the document has no GET operation on /public/v1/api/execute",
    );
    // A HEAD's answer has no body: its status says it.
    expect((await check("HEAD", "/public/v1/api/execute", new Response(null, { status: 405, headers: { allow: "OPTIONS, POST" } }))).violations).toEqual([]);
    expect((await check("HEAD", "/nowhere", new Response(null, { status: 404 }))).violations).toEqual([]);
    expect((await check("HEAD", "/nowhere", new Response(null, { status: 200 }))).violations[0]).toContain("no path of the OpenAPI document matches it");
  });

  it("refuses a missing required header and a header of the wrong form", async () => {
    const { violations } = await check(
      "POST",
      "/public/widget/chat",
      new Response(frames({ type: "finish", finishReason: "stop" }), {
        headers: { ...STREAM, "x-vercel-ai-ui-message-stream": "v2", "x-accel-buffering": "" },
      }),
    );
    expect(violations.join("\n")).toContain("X-Vercel-AI-UI-Message-Stream");
    const missing = await check(
      "OPTIONS",
      "/public/v1/api/execute",
      new Response(null, { status: 204, headers: { "access-control-allow-methods": "POST, OPTIONS" } }),
    );
    expect(missing.violations).toEqual([
      "OPTIONS /public/v1/api/execute → 204: the header Access-Control-Allow-Headers is missing",
      "OPTIONS /public/v1/api/execute → 204: the header Access-Control-Max-Age is missing",
    ]);
  });

  it("refuses a media type the answer does not list", async () => {
    const { violations } = await check(
      "GET",
      "/public/widget/config",
      new Response("<html>", { headers: { "content-type": "text/html", "cache-control": "no-store" } }),
    );
    expect(violations[0]).toContain('its Content-Type is "text/html", the document lists application/json');
  });

  it("checks each server-sent event as the caller reads it, without changing a byte", async () => {
    const good = frames(
      { type: "data-run", data: { run_id: RUN_ID, conversation_id: CONVERSATION_ID } },
      { type: "text-start", id: "m1" },
      { type: "text-delta", id: "m1", delta: "Echo: hi" },
      { type: "text-end", id: "m1" },
      { type: "finish", finishReason: "stop", messageMetadata: { status: "success", livechat_mode: null } },
    );
    const passed = await check("POST", "/public/v1/api/execute", new Response(good, { headers: STREAM }));
    expect(await passed.response.text()).toBe(good);
    expect(passed.violations).toEqual([]);

    const bad = `${frames({ type: "data-run", data: { run_id: RUN_ID, conversation_id: CONVERSATION_ID } }, { type: "text-delta", id: "m1" })}: keep-alive\n\ndata: {"type":"finish"`;
    const failed = await check("POST", "/public/v1/api/execute", new Response(bad, { headers: STREAM }));
    expect(failed.violations).toEqual([]);
    expect(await failed.response.text()).toBe(bad);
    expect(failed.violations).toHaveLength(2);
    expect(failed.violations[0]).toMatch(/^POST \/public\/v1\/api\/execute → 200: the event data: \{"type":"text-delta","id":"m1"\}: event\/data must/);
    expect(failed.violations[1]).toContain("the stream ended inside an event");
  });

  it("reads the live chat's events with their ids", async () => {
    const events = `data: ${JSON.stringify({ type: "mode", mode: "livechat_waiting", livechat_status_message: null, livechat_conversation_id: null })}\n\nid: 3\ndata: ${JSON.stringify({ type: "message", message: { role: "assistant" } })}\n\n`;
    const { violations, response } = await check("GET", "/public/v1/api/conversations/x/events", new Response(events, { headers: { ...STREAM } }));
    await response.text();
    expect(violations).toHaveLength(1);
    expect(violations[0]).toContain("id: 3");
  });
});

describe("the contract suite's requests", () => {
  it("all go through the checking fetch: every suite file that fetches imports it", () => {
    const directory = new URL(".", import.meta.url);
    // adapter.ts holds helpers for an adapter's own tests (its own routes), outside the suite.
    const exempt = new Set(["conformance.ts", "adapter.ts"]);
    const unchecked = readdirSync(directory)
      .filter((name) => name.endsWith(".ts") && !name.endsWith(".test.ts") && !exempt.has(name))
      .filter((name) => {
        const source = readFileSync(new URL(name, directory), "utf8");
        return /\bfetch\(/.test(source) && !source.includes('import { fetch } from "./conformance.js";');
      });
    expect(unchecked, 'these files call the global fetch: import { fetch } from "./conformance.js"').toEqual([]);
  });
});
