export { type KyselyStorage, kyselyStorage } from "./storage.js";
export { sqlite, type SqliteOptions } from "./sqlite.js";
export { backupSqlite } from "./sqlite-backup.js";
export { postgres, type PostgresOptions } from "./postgres.js";
export { openStorage } from "./open.js";
export { migrations, migrateToLatest } from "./migrations.js";
export { type KyselyPluginMigration, pluginDatabase, pluginSchema } from "./plugin-database.js";
export type { Database } from "./schema.js";
