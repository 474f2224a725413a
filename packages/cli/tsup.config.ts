import { defineConfig } from "tsup";
import { packageBuild } from "../../tsup.base.js";

export default defineConfig({
  ...packageBuild,
  entry: ["src/index.ts", "src/bin.ts"],
  // The package is a command; its programmatic `main` is typed by the source, not shipped declarations.
  dts: false,
});
