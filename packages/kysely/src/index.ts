export { KyselyStorage } from "./storage.js";
export { sqlite, type SqliteOptions } from "./sqlite.js";
export { migrations, migrateToLatest } from "./migrations.js";
export type { Database } from "./schema.js";
