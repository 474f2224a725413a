import { describe, expect, it } from "vitest";
import { contrast, textOn } from "./theme.js";

describe("textOn", () => {
  it("picks white on dark primaries and black on light ones", () => {
    expect(textOn("#4338ca")).toBe("#ffffff");
    expect(textOn("#000000")).toBe("#ffffff");
    expect(textOn("#fde047")).toBe("#000000");
    expect(textOn("#ffffff")).toBe("#000000");
  });

  it("keeps WCAG AA contrast (4.5:1) on any primary colour", () => {
    let worst = 21;
    for (let r = 0; r < 256; r += 15) {
      for (let g = 0; g < 256; g += 15) {
        for (let b = 0; b < 256; b += 15) {
          const color = `#${[r, g, b].map((value) => value.toString(16).padStart(2, "0")).join("")}`;
          worst = Math.min(worst, contrast(color, textOn(color)));
        }
      }
    }
    expect(worst).toBeGreaterThanOrEqual(4.5);
  });
});
