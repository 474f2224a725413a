import type { Options } from "tsup";

/** The build every package shares: ESM with declarations and source maps, for Node 20. */
export const packageBuild = {
  entry: ["src/index.ts"],
  format: ["esm"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "node20",
} satisfies Options;
