/**
 * A PostgreSQL server of a test's own, on a port of its own, made with the machine's
 * Postgres tools (`initdb`, `pg_ctl`), so that a test can stop and start it without touching
 * the server the other tests share. Run as the `postgres` user when the tests run as root
 * (Postgres refuses to run as root).
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The directory of the machine's Postgres binaries (Debian's layout, then the PATH's), or null. */
export function postgresBin(): string | null {
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const versions = readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    for (const version of versions) if (existsSync(join(debian, version, "bin", "initdb"))) return join(debian, version, "bin");
  }
  return null;
}

/** A server made by {@link ownPostgres}. */
export interface OwnPostgres {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`. */
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops it for good and removes its files. */
  dispose(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Creates and starts a new server in a temporary directory. */
export async function ownPostgres(bin: string): Promise<OwnPostgres> {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-pg-"));
  const root = process.getuid?.() === 0;
  if (root) await chown(dir, ...(await postgresIds()));
  const as = (command: string, args: string[]) =>
    root ? run("runuser", ["-u", "postgres", "--", join(bin, command), ...args]) : run(join(bin, command), args);
  const data = join(dir, "data");
  await as("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = async () => {
    await as("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "log"), "-w", "start"]);
  };
  const stop = async () => {
    await as("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]);
  };
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop,
    async dispose() {
      await stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function postgresIds(): Promise<[number, number]> {
  const [uid, gid] = await Promise.all([run("id", ["-u", "postgres"]), run("id", ["-g", "postgres"])]);
  return [Number(uid.stdout.trim()), Number(gid.stdout.trim())];
}
