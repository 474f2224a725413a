/**
 * Keeps the most recent messages whose summed `tokenCount` fits in `budget` (0 = no limit).
 * Messages come oldest first and are returned oldest first; the walk stops at the first
 * message that does not fit, so the window never has a hole in it.
 */
export function fitTokenBudget<T extends { tokenCount: number }>(messages: T[], budget: number): T[] {
  if (budget <= 0) return messages;
  let total = 0;
  let start = messages.length;
  while (start > 0) {
    const next = (messages[start - 1] as T).tokenCount;
    if (total + next > budget) break;
    total += next;
    start--;
  }
  return messages.slice(start);
}
