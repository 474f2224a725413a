#!/usr/bin/env node
// `npm run openapi`: writes docs/openapi.json, the OpenAPI 3.1 document of every route of
// channelkit and of its plugins (test/openapi-document.ts), from the sources of
// @channelkit/core and @channelkit/widget (bundled in memory with the esbuild the repository
// already has, so no build of dist/ is needed), then formats it with Biome as `npm run lint`
// expects. test/openapi.test.ts fails while the file differs from what this writes.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const target = `${root}docs/openapi.json`;

const bundled = await build({
  entryPoints: [`${root}test/openapi-document.ts`],
  bundle: true,
  write: false,
  platform: "node",
  format: "esm",
  target: "node20",
  logLevel: "warning",
  // The sources, as the tests see them (vitest.config.ts).
  alias: { "@channelkit/core": `${root}packages/core/src/index.ts` },
  plugins: [
    {
      // The widget's loader, which the build embeds: its routes are described, never served.
      name: "widget-script",
      setup(build) {
        build.onResolve({ filter: /\/widget-script\.js$/ }, (args) => ({ path: args.path, namespace: "widget-script" }));
        build.onLoad({ filter: /.*/, namespace: "widget-script" }, () => ({
          contents: 'export const WIDGET_SCRIPT = ""; export const WIDGET_SCRIPT_ETAG = "\\"\\"";',
          loader: "js",
        }));
      },
    },
  ],
});
const source = bundled.outputFiles[0].text;
const { channelkitOpenApiDocument } = await import(`data:text/javascript;base64,${Buffer.from(source).toString("base64")}`);

writeFileSync(target, `${JSON.stringify(channelkitOpenApiDocument(), null, 2)}\n`);
execFileSync(`${root}node_modules/.bin/biome`, ["format", "--write", target], { stdio: "inherit" });
console.log(`wrote ${target}`);
