import { defineConfig } from "tsup";

/**
 * The one-tag loader, `dist/widget.js`: one minified IIFE with everything bundled (the SSE
 * parser included), for browsers of the last few years. Built first: the plugin build embeds it.
 */
export default defineConfig({
  entry: { widget: "src/loader.ts" },
  format: ["iife"],
  // tsup names IIFE output `.global.js` by default; the served name is `widget.js`.
  outExtension: () => ({ js: ".js" }),
  platform: "browser",
  target: ["chrome100", "firefox100", "safari15.4"],
  minify: true,
  // Dependencies are external by default; a script tag has no resolver to find them.
  noExternal: [/.*/],
  clean: true,
  sourcemap: false,
  dts: false,
});
