import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { betterSqlite3, loadDriver, pgDriver } from "./drivers.js";

describe("optional database drivers", () => {
  it("says which package to install when a driver is missing", () => {
    expect(() => loadDriver("channelkit-no-such-driver", "sqlite()")).toThrow(
      "channelkit: sqlite() needs the channelkit-no-such-driver package: npm install channelkit-no-such-driver",
    );
  });

  it("keeps the failure of a driver that is there but breaks as it loads", () => {
    const dir = mkdtempSync(join(tmpdir(), "channelkit-driver-"));
    try {
      const broken = join(dir, "broken.cjs");
      writeFileSync(broken, "throw new Error('no native build for this Node');");
      expect(() => loadDriver(broken, "sqlite()")).toThrow("no native build for this Node");
      // A driver whose own dependency is missing is not reported as the driver missing.
      const incomplete = join(dir, "incomplete.cjs");
      writeFileSync(incomplete, "require('channelkit-no-such-dependency');");
      expect(() => loadDriver(incomplete, "postgres()")).toThrow("Cannot find module 'channelkit-no-such-dependency'");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("loads each driver once", () => {
    expect(betterSqlite3()).toBe(betterSqlite3());
    expect(typeof betterSqlite3()).toBe("function");
    expect(typeof pgDriver().Pool).toBe("function");
  });
});
