import { defineConfig } from "tsup";
import { packageBuild } from "../../tsup.base.js";

/**
 * The ESM entries: the element for bundlers (`.`) and the plugin serving the loader
 * (`./plugin`). Runs after `tsup.loader.config.ts` and `scripts/embed-loader.mjs`, whose
 * output it must keep, so it does not clean `dist`.
 */
export default defineConfig({
  ...packageBuild,
  entry: ["src/index.ts", "src/plugin.ts"],
  clean: false,
  // The element runs in browsers and the plugin on any Web-standard runtime, not only Node.
  platform: "neutral",
  target: "es2022",
});
