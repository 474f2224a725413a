#!/usr/bin/env node
// `npm run openapi`: writes docs/openapi.json, the OpenAPI 3.1 document of channelkit's
// routes, from the sources of @channelkit/core (bundled in memory with the esbuild the
// repository already has, so no build of dist/ is needed), then formats it with Biome as
// `npm run lint` expects. packages/core/src/openapi/openapi.test.ts fails while the file
// differs from what this writes.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const target = `${root}docs/openapi.json`;

const bundled = await build({
  entryPoints: [`${root}packages/core/src/openapi/document.ts`],
  bundle: true,
  write: false,
  platform: "neutral",
  format: "esm",
  target: "node20",
  logLevel: "warning",
});
const source = bundled.outputFiles[0].text;
const { openApiText } = await import(`data:text/javascript;base64,${Buffer.from(source).toString("base64")}`);

writeFileSync(target, openApiText());
execFileSync(`${root}node_modules/.bin/biome`, ["format", "--write", target], { stdio: "inherit" });
console.log(`wrote ${target}`);
