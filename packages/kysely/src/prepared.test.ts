import BetterSqlite3 from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import { describe, expect, it } from "vitest";
import { PreparedQueries, PreparedQuery } from "./prepared.js";
import type { Database } from "./schema.js";

const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new BetterSqlite3(":memory:") }) });

describe("PreparedQuery", () => {
  it("binds each argument where its placeholder was, whatever order the compiled query has", () => {
    const query = new PreparedQuery(2, ($) => db.selectFrom("messages").selectAll().where("conversation_id", "=", $(1)).where("role", "=", "user").limit($(0)));
    const compiled = query.bind([50, "c-1"]);
    expect(compiled.sql).toBe('select * from "messages" where "conversation_id" = ? and "role" = ? limit ?');
    expect(compiled.parameters).toEqual(["c-1", "user", 50]);
    expect(query.bind([10, "c-2"]).parameters).toEqual(["c-2", "user", 10]);
  });

  it("refuses a build that leaves a placeholder out", () => {
    expect(() => new PreparedQuery(2, ($) => db.selectFrom("conversations").selectAll().where("id", "=", $(0)))).toThrow(/placeholder 1/);
  });
});

describe("PreparedQueries", () => {
  it("builds one query per key, on first use", () => {
    let built = 0;
    const queries = new PreparedQueries((count: number) => {
      built++;
      return new PreparedQuery(count, ($) =>
        db
          .selectFrom("conversations")
          .selectAll()
          .where(
            "id",
            "in",
            Array.from({ length: count }, (_, i) => $(i)),
          ),
      );
    });
    expect(queries.get(2)).toBe(queries.get(2));
    expect(queries.get(3).bind(["a", "b", "c"]).parameters).toEqual(["a", "b", "c"]);
    expect(built).toBe(2);
  });
});
