import { describeWithPostgres } from "@channelkit/testkit";
import { Validator } from "@seriousme/openapi-schema-validator";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MCP_STREAMS_PER_KEY, type McpTestChannel, postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "b7".repeat(32);

/** The tool's structured result. */
interface Answer {
  conversation_id: string;
  status: string;
  reply: string;
}

function answerOf(result: unknown): Answer {
  return (result as CallToolResult).structuredContent as unknown as Answer;
}

function textOf(result: unknown): string {
  const [first] = (result as CallToolResult).content;
  return first?.type === "text" ? first.text : "";
}

function mcpTests(name: string, database: () => Promise<TestDatabase>) {
  describe(`MCP channels on ${name}`, () => {
    const instances = new TwoInstances();
    let echo: McpTestChannel;
    let ask: McpTestChannel;
    let fail: McpTestChannel;
    let slow: McpTestChannel;

    beforeAll(async () => {
      await instances.start(await database(), SECRET_KEY);
      echo = await instances.channel("echo", { tool_name: "echo_agent", tool_description: "Echoes what it is told.", server_name: "Echo server" });
      ask = await instances.channel("ask");
      fail = await instances.channel("fail");
      slow = await instances.channel("slow");
    });
    afterAll(() => instances.stop());

    it("lists the one tool, named and described by the channel's settings", async () => {
      const client = await instances.connect(echo);
      expect(client.getServerVersion()?.name).toBe("Echo server");
      const { tools } = await client.listTools();
      expect(tools).toHaveLength(1);
      expect(tools[0]).toMatchObject({ name: "echo_agent", description: "Echoes what it is told." });
      expect(Object.keys(tools[0]?.inputSchema.properties ?? {}).sort()).toEqual(["conversation_id", "message"]);
      expect(tools[0]?.inputSchema.required).toEqual(["message"]);
      // The defaults: the tool `ask`.
      const { tools: defaults } = await (await instances.connect(ask)).listTools();
      expect(defaults.map((tool) => tool.name)).toEqual(["ask"]);
    });

    it("calls the tool twice in one conversation, the second on the other instance; history has both in order", async () => {
      const progress: string[] = [];
      const first = await (await instances.connect(echo, { to: 0 })).callTool({ name: "echo_agent", arguments: { message: "one" } }, undefined, {
        onprogress: (update) => void progress.push(update.message ?? ""),
      });
      expect(first.isError).toBeFalsy();
      expect(textOf(first)).toBe("Echo: one");
      const { conversation_id } = answerOf(first);
      expect(answerOf(first)).toEqual({ conversation_id, status: "success", reply: "Echo: one" });
      // The reply's text came as progress notifications while the flow ran.
      expect(progress.join("")).toBe("Echo: one");

      const second = await (await instances.connect(echo, { to: 1 })).callTool({ name: "echo_agent", arguments: { message: "two", conversation_id } });
      expect(answerOf(second)).toEqual({ conversation_id, status: "success", reply: "Echo: two" });

      const history = await fetch(`${instances.url(1)}/public/v1/api/conversations/${conversation_id}/messages`, {
        headers: { authorization: `Bearer ${echo.key}` },
      });
      expect(history.status).toBe(200);
      const { messages } = (await history.json()) as { messages: { role: string; content: string }[] };
      expect(messages.map((message) => `${message.role}: ${message.content}`)).toEqual([
        "user: one",
        "assistant: Echo: one",
        "user: two",
        "assistant: Echo: two",
      ]);
    });

    it("answers a paused flow's question as a pending result; the next call in the conversation answers it", async () => {
      const question = await (await instances.connect(ask, { to: 1 })).callTool({ name: "ask", arguments: { message: "hi" } });
      const { conversation_id } = answerOf(question);
      expect(answerOf(question)).toEqual({ conversation_id, status: "pending", reply: "What is your name?" });
      expect(textOf(question)).toBe("What is your name?");
      const answer = await (await instances.connect(ask, { to: 0 })).callTool({ name: "ask", arguments: { message: "Ada", conversation_id } });
      expect(answerOf(answer)).toEqual({ conversation_id, status: "success", reply: "Nice to meet you, Ada!" });
    });

    it("answers a failing flow, and an unknown conversation, as tool errors", async () => {
      const failed = await (await instances.connect(fail)).callTool({ name: "ask", arguments: { message: "go" } });
      expect(failed.isError).toBe(true);
      expect(textOf(failed)).toBe("flow_error: flow failed on purpose");
      expect(answerOf(failed)).toMatchObject({ status: "error", reply: "Working on it" });

      const unknown = await (await instances.connect(echo)).callTool({
        name: "echo_agent",
        arguments: { message: "hello", conversation_id: "00000000-0000-4000-8000-000000000000" },
      });
      expect(unknown.isError).toBe(true);
      expect(textOf(unknown)).toMatch(/^conversation_not_found: /);

      const invalid = await (await instances.connect(echo)).callTool({ name: "echo_agent", arguments: { message: "" } });
      expect(invalid.isError).toBe(true);
      expect(textOf(invalid)).toMatch(/Input validation error[\s\S]*message must not be empty/);
    });

    it("counts a tool call's event stream against the key's cap on open streams: past it, 429 too_many_streams, on the instance that holds them", async () => {
      const client = await instances.connect(slow);
      let firstWords = 0;
      const calls = Array.from({ length: MCP_STREAMS_PER_KEY }, () =>
        client.callTool({ name: "ask", arguments: { message: "go" } }, undefined, {
          onprogress: () => void firstWords++,
          resetTimeoutOnProgress: true,
        }),
      );
      // Both calls stream: each has sent its first progress.
      for (let i = 0; i < 500 && firstWords < MCP_STREAMS_PER_KEY; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(firstWords).toBeGreaterThanOrEqual(MCP_STREAMS_PER_KEY);
      const call = (accept: string) =>
        fetch(`${instances.url()}/channels/mcp/${slow.id}`, {
          method: "POST",
          headers: { authorization: `Bearer ${slow.key}`, "content-type": "application/json", accept },
          body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: {} }),
        });
      const refused = await call("application/json, text/event-stream");
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(await refused.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32001, data: { code: "too_many_streams" } } });
      // The other instance counts its own streams; a client that takes no event stream is the SDK's 406, never counted.
      const other = await fetch(`${instances.url(1)}/channels/mcp/${slow.id}`, {
        method: "POST",
        headers: { authorization: `Bearer ${slow.key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/list", params: {} }),
      });
      expect(other.status).toBe(200);
      await other.text();
      expect((await call("application/json")).status).toBe(406);
      for (const result of await Promise.all(calls)) expect(result.isError).not.toBe(true);
    });

    it("refuses a wrong key with 401 before MCP: the contract's code in the JSON-RPC error", async () => {
      // The SDK's StreamableHTTPError: the HTTP status as its code, the JSON-RPC error in its message.
      const refused = { code: 401, message: expect.stringContaining('"data":{"code":"invalid_api_key"}') };
      await expect(instances.connect(echo, { key: "svc_sk_live_wrong" })).rejects.toMatchObject(refused);
      // Another MCP channel's key is no key of this one.
      await expect(instances.connect(echo, { key: ask.key })).rejects.toMatchObject(refused);
      const raw = await fetch(`${instances.url()}/channels/mcp/${echo.id}`, {
        method: "POST",
        headers: { authorization: "Bearer nope", "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(raw.status).toBe(401);
      expect(await raw.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32001, data: { code: "invalid_api_key" } } });
    });

    it("describes its routes in the service's OpenAPI document, which stays valid", async () => {
      const document = (await (await fetch(`${instances.url()}/public/v1/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { operationId: string }>>;
      };
      const item = document.paths["/channels/mcp/{channel_id}"] ?? {};
      expect(Object.fromEntries(Object.entries(item).map(([method, operation]) => [method, operation.operationId]))).toMatchObject({
        post: "mcpMessage",
        get: "mcpStream",
        delete: "mcpEndSession",
      });
      const result = await new Validator().validate(document as unknown as Parameters<Validator["validate"]>[0]);
      expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    });

    it("answers GET and DELETE with 405: the server is stateless", async () => {
      for (const method of ["GET", "DELETE"]) {
        const answer = await fetch(`${instances.url()}/channels/mcp/${echo.id}`, { method, headers: { accept: "text/event-stream" } });
        expect(answer.status).toBe(405);
        expect(answer.headers.get("allow")).toBe("POST");
      }
    });
  });
}

mcpTests("SQLite", sqliteDatabase);

describeWithPostgres("MCP channels on Postgres", (serverUrl) => {
  mcpTests("Postgres", () => postgresDatabase(serverUrl));
});
