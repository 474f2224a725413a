import { defineConfig } from "tsup";
import { packageBuild } from "../../tsup.base.js";

export default defineConfig({
  ...packageBuild,
  // The root export, and @channelkit/testkit/storage: the storage suite alone, which loads
  // no database driver (an in-memory or custom Storage is tested without pg or SQLite).
  entry: ["src/index.ts", "src/storage.ts"],
});
