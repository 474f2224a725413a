/**
 * Test helpers for tests that drive `channelkit serve` processes over HTTP: an execute, and
 * one run read to its end as JSON or SSE. Not part of the package.
 */
import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase } from "@channelkit/testkit";
import { expect } from "vitest";
import type { ServeProcess } from "./test-process.js";

export interface CreatedChannel {
  channel: { id: string; client_id?: string };
  api_key: string;
  signing_secret: string | null;
}

export interface RunDocument {
  run_id: string;
  conversation_id: string;
  status: string;
  output: { messages: { role: string; content: string }[] } | null;
}

export interface HistoryMessage {
  origin: string;
  role: string;
  content: string;
  turn_index: number;
  run_id: string | null;
}

export interface StreamEvent {
  type: string;
  delta?: string;
  data?: { run_id: string; conversation_id: string };
}

export function execute(
  server: ServeProcess,
  key: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${server.url}/public/v1/api/execute`, {
    signal,
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** One run read to its end: the JSON document, or the SSE body with every event. */
export interface Ran {
  status: number;
  runId: string;
  conversationId: string;
  /** `success` for JSON; for a stream, `success` when it ended with `finish` and no `error`. */
  outcome: string;
  reply: string;
}

export async function run(server: ServeProcess, key: string, body: { payload: string; conversation_id?: string; stream?: boolean }): Promise<Ran> {
  const response = await execute(server, key, body);
  if (response.status !== 200) return { status: response.status, runId: "", conversationId: "", outcome: await response.text(), reply: "" };
  if (!body.stream) {
    const document = (await response.json()) as RunDocument;
    return {
      status: 200,
      runId: document.run_id,
      conversationId: document.conversation_id,
      outcome: document.status,
      reply: (document.output?.messages ?? []).map((m) => m.content).join(""),
    };
  }
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const events = (await response.text())
    .split("\n\n")
    .filter(Boolean)
    .map((frame) => JSON.parse(frame.replace(/^data: /, "")) as StreamEvent);
  const first = events[0];
  const ended = events.at(-1)?.type === "finish" && !events.some((e) => e.type === "error");
  return {
    status: 200,
    runId: first?.type === "data-run" ? (first.data?.run_id ?? "") : "",
    conversationId: first?.type === "data-run" ? (first.data?.conversation_id ?? "") : "",
    outcome: ended ? "success" : JSON.stringify(events),
    reply: events.flatMap((e) => (e.type === "text-delta" ? [e.delta ?? ""] : [])).join(""),
  };
}

/** A database for processes to share, and what removes it once they are gone. */
export interface SharedDatabase {
  /** The `--db` value: a SQLite file path or a Postgres URL. */
  db: string;
  drop(): Promise<void>;
}

/** A new SQLite file in the temporary directory (its WAL files removed with it). */
export async function sqliteDatabase(name: string): Promise<SharedDatabase> {
  const db = join(tmpdir(), `channelkit-${name}-${randomUUID()}.db`);
  return { db, drop: () => Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true }))).then(() => undefined) };
}

/** A new database on the Postgres server at `serverUrl`. */
export async function postgresDatabase(serverUrl: string): Promise<SharedDatabase> {
  const database = await createTestDatabase(serverUrl);
  return { db: database.url, drop: () => database.drop() };
}
