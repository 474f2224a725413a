import { defineConfig } from "tsup";
import { packageBuild } from "../../tsup.base.js";

// The client runs in browsers and on Web-standard runtimes as well as on Node: ES2022 rather than node20.
export default defineConfig({ ...packageBuild, target: "es2022", platform: "neutral" });
