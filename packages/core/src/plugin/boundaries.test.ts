import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const API = join(SRC, "plugin", "api.ts");

/**
 * The folders of channelkit's own plugins: each may import its own files, packages, and the
 * plugin API (plugin/api.ts), nothing else of core. What they need and core does not export
 * is what the plugin API lacks for everyone.
 */
const PLUGIN_FOLDERS = ["channels/api", "channels/webhook", "channels/widget", "admin/routes", "livechat/inbox", "livechat/bridge"];

function sources(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith(".ts") && !name.endsWith(".test.ts") ? [path] : [];
  });
}

/** The module specifiers a file imports or re-exports, values and types alike. */
function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/g)].map((match) => match[1] as string);
}

describe("channelkit's own plugins use the public plugin API only", () => {
  for (const folder of PLUGIN_FOLDERS) {
    it(folder, () => {
      const root = join(SRC, folder);
      const outside: string[] = [];
      for (const file of sources(root)) {
        for (const specifier of imports(file)) {
          if (!specifier.startsWith(".")) continue;
          const target = resolve(dirname(file), specifier).replace(/\.js$/, ".ts");
          if (target === API || target.startsWith(`${root}/`)) continue;
          outside.push(`${relative(SRC, file)} imports ${relative(SRC, target)}`);
        }
      }
      expect(outside).toEqual([]);
    });
  }

  it("the check sees imports (it finds the plugin API imported)", () => {
    const all = PLUGIN_FOLDERS.flatMap((folder) => sources(join(SRC, folder))).flatMap((file) =>
      imports(file).map((specifier) => resolve(dirname(file), specifier).replace(/\.js$/, ".ts")),
    );
    expect(all).toContain(API);
  });
});
