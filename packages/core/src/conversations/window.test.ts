import { describe, expect, it } from "vitest";
import { estimateTokens } from "./tokens.js";
import { fitTokenBudget } from "./window.js";

const messages = (...counts: number[]) => counts.map((tokenCount, i) => ({ id: i, tokenCount }));
const ids = (list: { id: number }[]) => list.map((message) => message.id);

describe("fitTokenBudget", () => {
  it("returns everything when the budget is 0 (unlimited) or negative", () => {
    const all = messages(5, 5, 5);
    expect(fitTokenBudget(all, 0)).toEqual(all);
    expect(fitTokenBudget(all, -1)).toEqual(all);
  });

  it("keeps the most recent messages that fit, oldest first", () => {
    expect(ids(fitTokenBudget(messages(4, 3, 2, 1), 3))).toEqual([2, 3]);
    expect(ids(fitTokenBudget(messages(4, 3, 2, 1), 6))).toEqual([1, 2, 3]);
  });

  it("includes a message that fits exactly", () => {
    expect(ids(fitTokenBudget(messages(4, 3, 2, 1), 10))).toEqual([0, 1, 2, 3]);
    expect(ids(fitTokenBudget(messages(4, 3, 2, 1), 9))).toEqual([1, 2, 3]);
  });

  it("stops at the first message that does not fit, leaving no hole", () => {
    // 1 + 10 > 5, so the tiny oldest message is not pulled in past the big one.
    expect(ids(fitTokenBudget(messages(1, 10, 2, 2), 5))).toEqual([2, 3]);
  });

  it("returns nothing when the newest message alone exceeds the budget", () => {
    expect(fitTokenBudget(messages(1, 1, 50), 10)).toEqual([]);
  });

  it("counts zero-token messages without spending budget", () => {
    expect(ids(fitTokenBudget(messages(0, 3, 0, 0), 3))).toEqual([0, 1, 2, 3]);
  });

  it("handles an empty list and does not mutate its input", () => {
    expect(fitTokenBudget([], 10)).toEqual([]);
    const input = messages(3, 3, 3);
    const copy = structuredClone(input);
    fitTokenBudget(input, 4);
    expect(input).toEqual(copy);
  });
});

describe("estimateTokens", () => {
  it("is ceil(characters / 4)", () => {
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("a")).toBe(1);
    expect(estimateTokens("abcd")).toBe(1);
    expect(estimateTokens("abcde")).toBe(2);
    expect(estimateTokens("x".repeat(400))).toBe(100);
  });
});
