import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts", "src/bin.ts"],
  format: ["esm"],
  // The package is a command; its programmatic `main` is typed by the source, not shipped declarations.
  dts: false,
  clean: true,
  sourcemap: true,
  target: "node20",
});
