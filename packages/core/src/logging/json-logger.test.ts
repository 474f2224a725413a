import { describe, expect, it } from "vitest";
import { jsonLogger } from "./json-logger.js";

describe("jsonLogger", () => {
  it("writes one JSON object per line: time, level, message, the ids as fields, the error as err, anything else in details", () => {
    const lines: string[] = [];
    const logger = jsonLogger({ write: (line) => lines.push(line), base: { service: "bot" } });
    const failure = Object.assign(new Error("connect ECONNREFUSED", { cause: new TypeError("socket") }), { code: "ECONNREFUSED" });
    logger.error("channelkit: flow failed", failure, { run_id: "r1", channel_id: "c1" }, 42n);
    logger.warn("channelkit: multi\nline");
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).not.toContain("\n");
    const [error, warning] = lines.map((line) => JSON.parse(line) as Record<string, any>);
    expect(error).toMatchObject({ level: "error", msg: "channelkit: flow failed", service: "bot", run_id: "r1", channel_id: "c1", details: ["42"] });
    expect(error?.err).toMatchObject({ name: "Error", message: "connect ECONNREFUSED", code: "ECONNREFUSED", cause: { name: "TypeError", message: "socket" } });
    expect(error?.err.stack).toContain("connect ECONNREFUSED");
    expect(Date.parse(error?.time)).not.toBeNaN();
    expect(warning).toEqual({ time: warning?.time, level: "warn", msg: "channelkit: multi\nline", service: "bot" });
  });
});
