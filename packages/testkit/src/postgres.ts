import pg from "pg";
import { describe, it } from "vitest";

/** The environment variable holding the Postgres server the tests may create databases on. */
export const POSTGRES_URL_ENV = "CHANNELKIT_TEST_POSTGRES_URL";

/** The test server's URL, or undefined when the variable is not set. */
export function postgresTestUrl(): string | undefined {
  const url = process.env[POSTGRES_URL_ENV];
  return url === undefined || url === "" ? undefined : url;
}

/** A database made for one test target, dropped afterwards. */
export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * Creates an empty database on the test server, so every target starts clean and targets
 * may run side by side. The server URL's database is only used to issue CREATE DATABASE.
 */
export async function createTestDatabase(serverUrl: string): Promise<TestDatabase> {
  const name = `channelkit_test_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  await withAdmin(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => withAdmin(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

async function withAdmin<T>(serverUrl: string, action: (client: pg.Client) => Promise<T>): Promise<T> {
  // Generous: on a loaded 2-core machine, a suite's processes all connecting at once may wait seconds for the server.
  const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 30_000 });
  await client.connect();
  try {
    return await action(client);
  } finally {
    await client.end();
  }
}

/**
 * `describe` for tests that need Postgres. Without {@link POSTGRES_URL_ENV} they are skipped
 * with the reason printed, except under `CI=true`, where a missing server is a failure.
 */
export function describeWithPostgres(name: string, body: (serverUrl: string) => void): void {
  const url = postgresTestUrl();
  if (url !== undefined) {
    describe(name, () => body(url));
    return;
  }
  const reason = `${name}: skipped, ${POSTGRES_URL_ENV} is not set (e.g. postgres://postgres@127.0.0.1:5432/postgres)`;
  if (process.env.CI === "true") {
    describe(name, () => {
      it("needs Postgres, which CI must provide", () => {
        throw new Error(`${reason}; CI must run the Postgres tests`);
      });
    });
    return;
  }
  console.warn(reason);
  describe.skip(name, () => body(""));
}
