import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const src = (name: string, entry = "index") => fileURLToPath(new URL(`./packages/${name}/src/${entry}.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    // Tests run against the sources, so a change is tested without a rebuild.
    // A key also matches its subpaths (`@channelkit/core/x` → `<target>/x`): subpaths come first.
    alias: {
      "@channelkit/core/adapter": src("core", "adapter"),
      "@channelkit/core/demo": src("core", "demo"),
      "@channelkit/core": src("core"),
      "@channelkit/kysely/bun-sqlite": src("kysely", "bun-sqlite"),
      "@channelkit/kysely/node-sqlite": src("kysely", "node-sqlite"),
      "@channelkit/kysely/d1": src("kysely", "d1"),
      "@channelkit/kysely": src("kysely"),
      "@channelkit/node": src("node"),
      "@channelkit/express": src("express"),
      "@channelkit/fastify": src("fastify"),
      "@channelkit/hono": src("hono"),
      "@channelkit/ai": src("ai"),
      "@channelkit/client": src("client"),
      "@channelkit/chat": src("chat"),
      "@channelkit/protocols": src("protocols"),
      "@channelkit/widget/plugin": src("widget", "plugin"),
      "@channelkit/widget": src("widget"),
      "@channelkit/testkit/storage": src("testkit", "storage"),
      "@channelkit/testkit": src("testkit"),
    },
  },
  test: {
    include: ["packages/*/src/**/*.test.ts", "examples/*.test.ts", "examples/*/src/**/*.test.ts", "test/*.test.ts", "test/runtimes/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Two cores: more workers than that only adds contention to timing-sensitive stream tests.
    maxWorkers: 2,
  },
});
