/**
 * Rotating the master key without downtime: two `channelkit serve` processes on one database
 * (a SQLite file, then Postgres) run under the new key with the old one as a fallback, while
 * two `channelkit secrets reseal` run together; every signed request is served throughout,
 * each channel is resealed once, and afterwards the old key can go.
 */
import { createHmac, randomBytes } from "node:crypto";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCli, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { postgresDatabase, type SharedDatabase, sqliteDatabase } from "./test-runs.js";

const OLD_KEY = randomBytes(32).toString("hex");
const NEW_KEY = randomBytes(32).toString("hex");
const OLD = { CHANNELKIT_SECRET_KEY: OLD_KEY };
const ROTATING = { CHANNELKIT_SECRET_KEY: NEW_KEY, CHANNELKIT_SECRET_KEY_FALLBACKS: ` ${OLD_KEY} ` };
const NEW = { CHANNELKIT_SECRET_KEY: NEW_KEY };

interface SignedChannel {
  id: string;
  key: string;
  secret: string;
}

interface Resealed {
  resealed: string[];
  current: number;
  unopened: string[];
}

/** A signed execute, its `X-Service-Signature` made by hand as interface.md describes it. */
function signedExecute(server: ServeProcess, channel: SignedChannel): Promise<Response> {
  const body = JSON.stringify({ payload: "signed", stream: false });
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac("sha256", channel.secret).update(`${t}.${body}`).digest("hex");
  return fetch(`${server.url}/public/v1/api/execute`, {
    method: "POST",
    headers: { authorization: `Bearer ${channel.key}`, "content-type": "application/json", "x-service-signature": `t=${t},v1=${v1}` },
    body,
  });
}

/** The status (and error code) of one signed execute per channel on `server`. */
async function statuses(server: ServeProcess, channels: SignedChannel[]): Promise<string[]> {
  return Promise.all(
    channels.map(async (channel) => {
      const response = await signedExecute(server, channel);
      const body = (await response.json()) as { error?: { code: string } };
      return `${response.status}${body.error ? ` ${body.error.code}` : ""}`;
    }),
  );
}

function rotationAcrossInstances(open: () => Promise<SharedDatabase>) {
  let database: SharedDatabase;
  let tenantId: string;
  const channels: SignedChannel[] = [];
  const cli = <T = any>(env: Record<string, string>, ...args: string[]) => runCliJson<T>([...args, "--db", database.db], env);

  beforeAll(async () => {
    await ensureBuilt();
    database = await open();
    await cli(OLD, "migrate");
    tenantId = (await cli<{ tenant: { id: string } }>(OLD, "tenant", "create", "--name", "Rotation")).tenant.id;
    // Sealed under the old key: three API channels that require signatures, and a webhook channel.
    for (const type of ["api", "api", "api", "webhook"]) {
      const created = await cli<{ channel: { id: string }; api_key: string; signing_secret: string }>(
        OLD,
        "channel",
        "create",
        "--tenant",
        tenantId,
        "--flow",
        "echo",
        "--type",
        type,
        ...(type === "api" ? ["--require-signature"] : []),
      );
      channels.push({ id: created.channel.id, key: created.api_key, secret: created.signing_secret });
    }
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await database?.drop();
  });

  const apiChannels = () => channels.slice(0, 3);

  it("a malformed fallback key is refused at start with the variable's name", async () => {
    const result = await runCli(["channel", "list", "--db", database.db], { ...NEW, CHANNELKIT_SECRET_KEY_FALLBACKS: "not-a-key" });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("CHANNELKIT_SECRET_KEY_FALLBACKS");
    expect(result.stderr).not.toContain(NEW_KEY);
  }, 60_000);

  it("two instances under the new key and the old one as a fallback serve the old secrets while two reseals run together; each channel is resealed once", async () => {
    const servers = await Promise.all([0, 1].map(() => startServe(["--db", database.db, "--port", "0"], ROTATING)));
    for (const server of servers) {
      expect(server.stderr()).toContain("sealed under a fallback master key");
      expect(await statuses(server, apiChannels())).toEqual(["200", "200", "200"]);
    }

    // Signed requests go to both instances, one after another per instance, until both reseals have ended.
    let resealing = true;
    const served: string[] = [];
    const load = servers.map(async (server) => {
      while (resealing) served.push(...(await statuses(server, apiChannels())));
    });
    const reseals = await Promise.all([0, 1].map(() => cli<Resealed>(ROTATING, "secrets", "reseal")));
    resealing = false;
    await Promise.all(load);

    expect(served.length).toBeGreaterThan(0);
    expect(served.filter((status) => status !== "200")).toEqual([]);
    const ids = channels.map((channel) => channel.id).sort();
    // Each channel once: by one reseal, found current by the other.
    expect(reseals.flatMap((done) => done.resealed).sort()).toEqual(ids);
    for (const done of reseals) {
      expect(done.unopened).toEqual([]);
      expect(done.resealed.length + done.current).toBe(channels.length);
    }
    const audit = await cli<{ events: { operation: string; channel_id: string; outcome: string; changes: Record<string, unknown> }[] }>(
      NEW,
      "audit",
      "--tenant",
      tenantId,
      "--limit",
      "200",
    );
    const events = audit.events.filter((event) => event.operation === "reseal_secrets");
    expect(events.map((event) => event.channel_id).sort()).toEqual(ids);
    for (const event of events) {
      expect(event.outcome).toBe("success");
      expect(event.changes).toEqual({ signing_secret: { from: "fallback key", to: "current key" } });
    }
    expect(JSON.stringify(audit)).not.toContain(channels[0]?.secret);

    // Both instances go on serving, now from secrets sealed under the new key.
    for (const server of servers) expect(await statuses(server, apiChannels())).toEqual(["200", "200", "200"]);
    await killAll();
  }, 120_000);

  it("after the reseal the fallback key can go: the new key alone opens every secret, the old one none", async () => {
    const [fresh, stale] = await Promise.all([startServe(["--db", database.db, "--port", "0"], NEW), startServe(["--db", database.db, "--port", "0"], OLD)]);
    expect(await statuses(fresh, apiChannels())).toEqual(["200", "200", "200"]);
    expect(fresh.stderr()).not.toContain("cannot be opened");
    expect(fresh.stderr()).not.toContain("fallback");
    expect(await statuses(stale, apiChannels())).toEqual(Array(3).fill("503 signing_secret_unavailable"));
    await killAll();

    // Nothing is left to reseal; under a key that opens nothing, every channel is reported, none changed.
    expect(await cli<Resealed>(NEW, "secrets", "reseal")).toEqual({ resealed: [], current: channels.length, unopened: [] });
    const other = await cli<Resealed>({ CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") }, "secrets", "reseal");
    expect(other.resealed).toEqual([]);
    expect(other.unopened.sort()).toEqual(channels.map((channel) => channel.id).sort());
  }, 120_000);
}

describe("rotating the master key across two channelkit serve processes on one SQLite file", () => {
  rotationAcrossInstances(() => sqliteDatabase("reseal"));
});

describeWithPostgres("rotating the master key across two channelkit serve processes on one Postgres database", (serverUrl) => {
  rotationAcrossInstances(() => postgresDatabase(serverUrl));
});
