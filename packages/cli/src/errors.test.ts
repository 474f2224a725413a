/**
 * The command's errors, from the built binary: always the envelope `{"error":{"code","message"}}`
 * on one line of stderr, never a plain line, never the `channelkit: ` prefix inside it (issue
 * 20: `channelkit: channelkit: a master key is required in production`, `channelkit:
 * channelkit: migration (unknown) failed: connect ECONNREFUSED`).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorEnvelope, reportError, UsageError } from "./errors.js";
import { ensureBuilt, killAll, runCli } from "./test-process.js";

const MASTER_KEY = randomBytes(32).toString("hex");
const files: string[] = [];

function tempDb(): string {
  const file = join(tmpdir(), `channelkit-errors-${randomUUID()}.db`);
  files.push(file);
  return file;
}

beforeAll(() => ensureBuilt(), 120_000);
afterAll(async () => {
  await killAll();
  await Promise.all(files.flatMap((file) => ["", "-wal", "-shm"].map((suffix) => rm(`${file}${suffix}`, { force: true }))));
});

/**
 * Stderr of a refused command: one line is the envelope, the others are the service's log
 * lines (warnings), each with the prefix once.
 */
function refusal(stderr: string): { code: string; message: string } {
  const lines = stderr.split("\n").filter(Boolean);
  const errors = lines.filter((line) => !line.startsWith("channelkit: "));
  expect(errors, stderr).toHaveLength(1);
  expect(stderr).not.toContain("channelkit: channelkit:");
  const { error } = JSON.parse(errors[0] as string) as { error: { code: string; message: string } };
  expect(Object.keys(error).sort()).toEqual(["code", "message"]);
  expect(error.message).not.toMatch(/^channelkit: /);
  return error;
}

describe("channelkit: errors are the envelope on stderr (built binary)", () => {
  it("a master key is required in production: service_error, for every command that opens the service, serve included", async () => {
    for (const args of [
      ["tenant", "create", "--name", "Acme"],
      ["serve", "--port", "0"],
    ]) {
      const result = await runCli([...args, "--db", tempDb()], { NODE_ENV: "production", CHANNELKIT_SECRET_KEY: undefined });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe("");
      expect(refusal(result.stderr)).toEqual({
        code: "service_error",
        message: "a master key is required in production: set CHANNELKIT_SECRET_KEY (openssl rand -hex 32).",
      });
    }
  });

  it("a database that refuses connections: database_error saying so (connect ECONNREFUSED)", async () => {
    // A port nothing listens on: taken, then freed.
    const free = createServer();
    await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
    const { port } = free.address() as AddressInfo;
    await new Promise((resolve) => free.close(resolve));
    for (const args of [["migrate"], ["tenant", "list"]]) {
      const result = await runCli([...args, "--db", `postgres://postgres@127.0.0.1:${port}/channelkit`], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
      expect(result.code).toBe(1);
      const error = refusal(result.stderr);
      expect(error.code).toBe("database_error");
      expect(error.message).toContain("ECONNREFUSED");
    }
  }, 30_000);

  it("a bad command line: usage_error on the first line, then the usage; exit 2", async () => {
    const result = await runCli(["channel", "show"]);
    expect(result.code).toBe(2);
    const [first, ...rest] = result.stderr.split("\n");
    expect(JSON.parse(first as string)).toEqual({ error: { code: "usage_error", message: "Missing argument: the channel ID" } });
    expect(rest.join("\n")).toContain("Usage: channelkit <command>");
    expect(result.stderr).not.toMatch(/^channelkit: /m);
  });

  it("a refusal of the admin (the contract's code), an unknown flow explained without a config file", async () => {
    const db = tempDb();
    const env = { CHANNELKIT_SECRET_KEY: MASTER_KEY };
    const shown = await runCli(["channel", "show", randomUUID(), "--db", db], env);
    expect(shown.code).toBe(1);
    expect(refusal(shown.stderr)).toEqual({ code: "channel_not_found", message: "No channel exists with this id." });
    const tenant = JSON.parse((await runCli(["tenant", "create", "--name", "Acme", "--db", db], env)).stdout).tenant.id as string;
    const created = await runCli(["channel", "create", "--tenant", tenant, "--flow", "support", "--environment", "prod", "--db", db], env);
    expect(created.code).toBe(1);
    const error = refusal(created.stderr);
    expect(error.code).toBe("validation_error");
    expect(error.message).toContain('Unknown flow "support". Registered flows: echo, fail, ask, handover, slow.');
    expect(error.message).toContain("No config file was found");
    expect(error.message).toContain("channelkit.config.ts");
  });

  it("serve on a port in use: address_in_use, naming it", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const result = await runCli(["serve", "--port", String(port), "--db", tempDb()], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
      expect(result.code).toBe(1);
      expect(refusal(result.stderr)).toEqual({
        code: "address_in_use",
        message: `127.0.0.1:${port} is already in use: stop what listens there, or pass another --port`,
      });
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});

describe("errorEnvelope and reportError: the one place errors are formatted", () => {
  it("keeps a library message without its prefix, a ServiceError's code and details, and exits 2 for usage only", () => {
    expect(errorEnvelope(new Error("channelkit: channelkit: migration (unknown) failed: connect ECONNREFUSED 127.0.0.1:5432"))).toEqual({
      error: { code: "runtime_error", message: "migration (unknown) failed: connect ECONNREFUSED 127.0.0.1:5432" },
    });
    expect(errorEnvelope("a string")).toEqual({ error: { code: "runtime_error", message: "a string" } });
    const lines: string[] = [];
    expect(reportError((line) => lines.push(line), new UsageError("--name is required"))).toBe(2);
    expect(reportError((line) => lines.push(line), new Error("channelkit: a master key is required in production"))).toBe(1);
    expect(lines[0]?.split("\n")[0]).toBe('{"error":{"code":"usage_error","message":"--name is required"}}');
    expect(lines[1]).toBe('{"error":{"code":"runtime_error","message":"a master key is required in production"}}');
  });
});
