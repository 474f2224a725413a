import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";

/** The repository's root. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** A runtime's binary as the npm devDependency installs it, and its version; or why not. */
export type Binary = { path: string; version: string } | { missing: string };

/**
 * The binary `node_modules/.bin/<name>` (the `bun` and `deno` packages put the real binary
 * there in their postinstall scripts), if it runs: `<name> --version` answers.
 */
export function runtimeBinary(name: "bun" | "deno"): Binary {
  const path = `${ROOT}node_modules/.bin/${name}`;
  if (!existsSync(path)) return { missing: `${path} does not exist (npm install, the ${name} devDependency)` };
  try {
    return { path, version: execFileSync(path, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim().split("\n")[0] as string };
  } catch (error) {
    return { missing: `${path} --version failed (was its postinstall script run?): ${(error as Error).message}` };
  }
}

/**
 * `describe` for tests on a runtime: without its binary they are skipped with the reason
 * printed, except under `CI=true`, where a missing binary is a failure (CI installs it from
 * the devDependencies).
 */
export function describeWithRuntime(name: string, binary: Binary, body: (path: string) => void): void {
  if ("path" in binary) {
    describe(`${name} (${binary.version})`, () => body(binary.path));
    return;
  }
  const reason = `${name}: skipped, ${binary.missing}`;
  if (process.env.CI === "true") {
    describe(name, () => {
      it(`needs ${name}, which CI must provide`, () => {
        throw new Error(`${reason}; CI must run the ${name} tests`);
      });
    });
    return;
  }
  console.warn(reason);
  describe.skip(name, () => body(""));
}
