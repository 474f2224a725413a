import { defineConfig } from "tsup";
import { packageBuild } from "../../tsup.base.js";

export default defineConfig({
  ...packageBuild,
  // The root export, and the subpaths @channelkit/core/adapter and @channelkit/core/demo.
  entry: ["src/index.ts", "src/adapter.ts", "src/demo.ts"],
});
