import { join } from "node:path";
import { build, type Plugin } from "esbuild";
import { describe, expect, it } from "vitest";
import { ROOT } from "./binaries.js";

/*
 * The packages that claim to run on Web-standard runtimes (core, the Hono adapter, the
 * client, the widget) bundled from their sources for a worker with esbuild, as a Worker or a
 * browser build would: platform "neutral", so a Node built-in cannot resolve. Each bundle
 * must import no Node module (`node:*` or a bare built-in), and use `Buffer` and `process`
 * only guarded (`globalThis.process`, `typeof process`): a regression fails here, before a
 * runtime's suite would.
 */

const src = (name: string, entry = "index") => join(ROOT, `packages/${name}/src/${entry}.ts`);

/** Each entry point a runtime imports, by package. */
const ENTRIES: Record<string, string[]> = {
  "@channelkit/core": [src("core"), src("core", "adapter"), src("core", "demo")],
  "@channelkit/hono": [src("hono")],
  "@channelkit/client": [src("client")],
  "@channelkit/widget": [src("widget"), src("widget", "plugin"), src("widget", "loader")],
};

/** The workspace packages from their sources, as vitest resolves them. */
const ALIASES: Record<string, string> = {
  "@channelkit/core/adapter": src("core", "adapter"),
  "@channelkit/core/demo": src("core", "demo"),
  "@channelkit/core": src("core"),
  "@channelkit/client": src("client"),
  "@channelkit/widget/plugin": src("widget", "plugin"),
  "@channelkit/widget": src("widget"),
};

const NODE_BUILTINS = new Set(
  "assert async_hooks buffer child_process cluster console crypto dgram diagnostics_channel dns events fs http http2 https inspector module net os path perf_hooks process querystring readline repl stream string_decoder timers tls tty url util v8 vm worker_threads zlib".split(
    " ",
  ),
);

/** Records every Node built-in an import asks for, and keeps it out of the bundle. */
function nodeImports(found: string[]): Plugin {
  return {
    name: "node-imports",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        const bare = args.path.replace(/^node:/, "").split("/")[0] as string;
        if (args.path.startsWith("node:") || NODE_BUILTINS.has(bare)) {
          found.push(`${args.path} (imported by ${args.importer.replace(ROOT, "")})`);
          return { path: args.path, external: true };
        }
        return undefined;
      });
    },
  };
}

/**
 * The free (global) `Buffer` and `process` references of a bundle, which esbuild's `define`
 * renamed to `__global_Buffer__`/`__global_process__` (locals and properties keep their
 * names), other than `typeof` checks: each is a line of context.
 */
function unguardedGlobals(code: string): string[] {
  const found: string[] = [];
  for (const match of code.matchAll(/__global_(Buffer|process)__/g)) {
    const at = match.index ?? 0;
    if (/typeof\s+$/.test(code.slice(Math.max(0, at - 10), at))) continue;
    found.push(code.slice(Math.max(0, at - 50), at + 60).replace(/\s+/g, " "));
  }
  return found;
}

const RENAMED_GLOBALS = { Buffer: "__global_Buffer__", process: "__global_process__" };

describe("portability: bundled for a Web-standard runtime (esbuild, platform neutral)", () => {
  for (const [name, entryPoints] of Object.entries(ENTRIES)) {
    it(`${name} imports no Node module and uses Buffer and process only guarded`, async () => {
      const imports: string[] = [];
      const result = await build({
        entryPoints,
        bundle: true,
        write: false,
        outdir: "/portable",
        format: "esm",
        platform: "neutral",
        target: "es2022",
        conditions: ["workerd", "worker", "browser"],
        mainFields: ["browser", "module", "main"],
        alias: ALIASES,
        define: RENAMED_GLOBALS,
        plugins: [nodeImports(imports)],
        logLevel: "silent",
      });
      expect(imports, "Node modules imported").toEqual([]);
      const globals = result.outputFiles.flatMap((file) => unguardedGlobals(file.text).map((use) => `${file.path}: ${use}`));
      expect(globals, "Buffer or process used without a guard").toEqual([]);
    });
  }

  it("the check finds what it looks for", async () => {
    const bundle = async (contents: string) =>
      unguardedGlobals(
        (await build({ stdin: { contents }, write: false, format: "esm", platform: "neutral", define: RENAMED_GLOBALS })).outputFiles[0]?.text ?? "",
      );
    const imports: string[] = [];
    await build({ stdin: { contents: "import 'node:fs'; import 'path';" }, bundle: true, write: false, platform: "neutral", plugins: [nodeImports(imports)] });
    expect(imports).toHaveLength(2);
    expect(await bundle("export const b = Buffer.from('x');")).toHaveLength(1);
    expect(await bundle("export const e = process.env.X;")).toHaveLength(1);
    expect(
      await bundle("const process = globalThis.process; export const p = process?.env; export const t = typeof Buffer; export const o = { process() {} };"),
    ).toEqual([]);
  });
});
