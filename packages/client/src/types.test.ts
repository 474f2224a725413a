import { describe, expectTypeOf, it } from "vitest";
import type { RunDocument } from "./types.js";

// Checked by the type-check (npm run typecheck): the server always answers both objects, and
// docs/client.md reads `run.output.messages` without a null check.
describe("RunDocument", () => {
  it("has output and usage as the server answers them: never null", () => {
    expectTypeOf<RunDocument["output"]>().not.toBeNullable();
    expectTypeOf<RunDocument["usage"]>().not.toBeNullable();
  });
});
