import { defineConfig } from "tsup";
import { packageBuild } from "../../tsup.base.js";

export default defineConfig({
  ...packageBuild,
  entry: ["src/index.ts", "src/bin.ts"],
  // Declarations for the programmatic `main`; the command itself has none to ship.
  dts: { entry: "src/index.ts" },
});
