/**
 * `channelkit conversation list|delete` and `channelkit end-user erase` (issue 45), on a real
 * SQLite file: JSON on stdout as the other commands print it, the error envelope on stderr.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqlite } from "@channelkit/kysely";
import { fillConversation } from "@channelkit/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "./main.js";

const MASTER_KEY = randomBytes(32).toString("hex");
const db = join(tmpdir(), `channelkit-cli-conversations-${randomUUID()}.db`);

afterAll(async () => {
  await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
});

/** Runs `channelkit ...args --db <the test's file>` in-process with captured output. */
async function cli(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, "--db", db], { env: { CHANNELKIT_SECRET_KEY: MASTER_KEY }, out: (line) => out.push(line), err: (line) => err.push(line) });
  return {
    code,
    json: () => {
      expect(err).toEqual([]);
      expect(out).toHaveLength(1);
      return JSON.parse(out[0] as string);
    },
    error: () => {
      expect(out).toEqual([]);
      // A bad command line: the envelope on the first line, the usage after it.
      return JSON.parse((err[0] as string).split("\n")[0] as string) as { error: { code: string; message: string } };
    },
  };
}

describe("channelkit conversation and end-user commands", () => {
  it("lists, deletes and erases, recorded in the audit trail as done by cli; bad input is a clear error", async () => {
    const tenantId = (await cli("tenant", "create", "--name", "Acme")).json().tenant.id as string;
    const channelId = (await cli("channel", "create", "--tenant", tenantId, "--flow", "echo")).json().channel.id as string;
    const storage = sqlite(db);
    const channel = { id: channelId, tenantId };
    const first = await fillConversation(storage, channel, { externalUserId: "tg-1", seconds: 10 });
    const second = await fillConversation(storage, channel, { externalUserId: "tg-2", seconds: 20 });
    const third = await fillConversation(storage, channel, { externalUserId: "tg-2", seconds: 30 });
    await storage.close();

    const listed = (await cli("conversation", "list", "--tenant", tenantId, "--channel", channelId)).json();
    expect(listed.conversations.map((c: { conversation_id: string }) => c.conversation_id)).toEqual([third.id, second.id, first.id]);
    expect(listed.next_cursor).toBeNull();
    const page = (await cli("conversation", "list", "--tenant", tenantId, "--limit", "1")).json();
    expect(page.conversations).toHaveLength(1);
    const next = (await cli("conversation", "list", "--tenant", tenantId, "--limit", "1", "--cursor", page.next_cursor)).json();
    expect(next.conversations[0].conversation_id).toBe(second.id);
    const byUser = (await cli("conversation", "list", "--end-user", "tg-2")).json();
    expect(byUser.conversations.map((c: { conversation_id: string }) => c.conversation_id)).toEqual([third.id, second.id]);

    expect((await cli("conversation", "delete", first.id)).json()).toEqual({ deleted: { conversation_id: first.id, messages: 5, runs: 2 } });
    const again = await cli("conversation", "delete", first.id);
    expect(again.code).toBe(1);
    expect(again.error().error.code).toBe("conversation_not_found");
    const bad = await cli("conversation", "delete", "not-a-uuid");
    expect(bad.code).toBe(1);
    expect(bad.error().error).toMatchObject({ code: "validation_error", message: "conversation_id must be a UUID" });
    const missing = await cli("conversation", "delete");
    expect(missing.code).toBe(2);
    expect(missing.error().error.message).toContain("Missing argument: the conversation ID");

    const erased = (await cli("end-user", "erase", "tg-2", "--tenant", tenantId)).json();
    expect(erased.erased).toMatchObject({ external_user_id: "tg-2", conversations: 2, messages: 10, runs: 4 });
    expect([...erased.erased.conversation_ids].sort()).toEqual([second.id, third.id].sort());
    expect((await cli("conversation", "list", "--tenant", tenantId)).json()).toEqual({ conversations: [], next_cursor: null });

    // Every tenant's trail: a refusal for a conversation that does not exist has no tenant to be filed under.
    const { events } = (await cli("audit")).json();
    expect(events.slice(0, 3).map((e: Record<string, unknown>) => [e.operation, e.outcome, e.error_code, e.actor])).toEqual([
      ["erase_end_user", "success", null, "cli"],
      ["delete_conversation", "failure", "validation_error", "cli"],
      ["delete_conversation", "failure", "conversation_not_found", "cli"],
    ]);
    expect(events[3]).toMatchObject({ operation: "delete_conversation", outcome: "success", tenant_id: tenantId, channel_id: channelId });
    // The trail never holds the end user's id in clear.
    expect(JSON.stringify(events)).not.toContain("tg-2");
  });

  it("exports JSON Lines: one conversation per line with its messages, by channel, period and conversation; bad input is a clear error", async () => {
    const tenantId = (await cli("tenant", "create", "--name", "Export")).json().tenant.id as string;
    const channelId = (await cli("channel", "create", "--tenant", tenantId, "--flow", "echo")).json().channel.id as string;
    const storage = sqlite(db);
    const channel = { id: channelId, tenantId };
    const first = await fillConversation(storage, channel, { seconds: 10 });
    const second = await fillConversation(storage, channel, { seconds: 4000 });
    await storage.close();

    const lines = async (...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await main(["conversation", "export", ...args, "--db", db], {
        env: { CHANNELKIT_SECRET_KEY: MASTER_KEY },
        out: (line) => out.push(line),
        err: (line) => err.push(line),
      });
      expect({ code, err }).toEqual({ code: 0, err: [] });
      return out.map((line) => JSON.parse(line) as { conversation: { conversation_id: string }; messages: { content: string; turn_index: number }[] });
    };
    const all = await lines("--tenant", tenantId, "--channel", channelId);
    expect(all.map((line) => line.conversation.conversation_id)).toEqual([second.id, first.id]);
    expect(all[1]?.messages.map((message) => message.turn_index)).toEqual([0, 1, 2, 3, 4]);
    expect(all[1]?.messages.map((message) => message.content).sort()).toEqual([...first.contents].sort());
    const firstHour = await lines("--channel", channelId, "--since", "2025-01-01T00:00:00Z", "--until", "2025-01-01T01:00:00Z");
    expect(firstHour.map((line) => line.conversation.conversation_id)).toEqual([first.id]);
    expect((await lines("--conversation", second.id)).map((line) => line.conversation.conversation_id)).toEqual([second.id]);
    expect(await lines("--channel", channelId, "--since", "2030-01-01T00:00:00Z")).toEqual([]);

    const bad = await cli("conversation", "export", "--since", "2025-02-01T00:00:00Z", "--until", "2025-01-01T00:00:00Z");
    expect(bad.code).toBe(1);
    expect(bad.error().error.code).toBe("validation_error");
    const events = (await cli("audit", "--tenant", tenantId)).json().events as { operation: string; actor: string }[];
    expect(events.filter((event) => event.operation === "export_conversations").length).toBe(4);
    expect(events.find((event) => event.operation === "export_conversations")?.actor).toBe("cli");
  });
});
