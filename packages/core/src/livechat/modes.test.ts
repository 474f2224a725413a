import { describe, expect, it } from "vitest";
import type { ConversationMode } from "../storage/types.js";
import { liveChatEnded, type ModeEvent, modeAt, nextMode, withHuman } from "./modes.js";

const MODES: ConversationMode[] = [
  "bot",
  "livechat_waiting",
  "livechat_active",
  "livechat_closed",
  "livechat_expired",
  "livechat_cancelled",
  "livechat_unavailable",
];

const EVENTS: Record<string, ModeEvent> = {
  "handover (an agent can take it)": { type: "handover", available: true },
  "handover (nobody can)": { type: "handover", available: false },
  "agent joined": { type: "agent_joined" },
  "agent closed": { type: "agent_closed" },
  "user cancelled": { type: "user_cancelled" },
  "wait expired": { type: "wait_expired" },
  "provider unavailable": { type: "provider_unavailable" },
  "user message": { type: "user_message" },
};

/** decisions.md, "Live chat", as a table: mode → event → [next mode, runs the flow], or refused. */
const EXPECTED: Record<ConversationMode, Record<string, [ConversationMode, boolean] | "refused">> = {
  bot: {
    "handover (an agent can take it)": ["livechat_waiting", false],
    "handover (nobody can)": ["livechat_unavailable", false],
    "agent joined": "refused",
    "agent closed": "refused",
    "user cancelled": "refused",
    "wait expired": "refused",
    "provider unavailable": "refused",
    "user message": ["bot", true],
  },
  livechat_waiting: {
    "handover (an agent can take it)": "refused",
    "handover (nobody can)": "refused",
    "agent joined": ["livechat_active", false],
    "agent closed": "refused",
    "user cancelled": ["livechat_cancelled", false],
    "wait expired": ["livechat_expired", false],
    "provider unavailable": ["livechat_unavailable", false],
    "user message": ["livechat_waiting", false],
  },
  livechat_active: {
    "handover (an agent can take it)": "refused",
    "handover (nobody can)": "refused",
    "agent joined": "refused",
    "agent closed": ["livechat_closed", false],
    "user cancelled": ["livechat_cancelled", false],
    "wait expired": "refused",
    "provider unavailable": "refused",
    "user message": ["livechat_active", false],
  },
  livechat_closed: {},
  livechat_expired: {},
  livechat_cancelled: {},
  livechat_unavailable: {},
};
// Every ended live chat behaves alike: only a user message moves it, back to the bot.
for (const ended of ["livechat_closed", "livechat_expired", "livechat_cancelled", "livechat_unavailable"] as const) {
  EXPECTED[ended] = Object.fromEntries(Object.keys(EVENTS).map((name) => [name, name === "user message" ? ["bot", true] : "refused"]));
}

describe("the live-chat mode machine", () => {
  for (const mode of MODES) {
    for (const [name, event] of Object.entries(EVENTS)) {
      const expected = EXPECTED[mode][name] as [ConversationMode, boolean] | "refused";
      it(`${mode} + ${name} → ${expected === "refused" ? "refused" : expected.join(", flow runs: ")}`, () => {
        const transition = nextMode(mode, event);
        if (expected === "refused") {
          expect(transition).toEqual({ refused: expect.stringContaining(mode) });
        } else {
          expect(transition).toEqual({ to: expected[0], runsFlow: expected[1] });
        }
      });
    }
  }

  it("says who has the conversation", () => {
    expect(MODES.filter(withHuman)).toEqual(["livechat_waiting", "livechat_active"]);
    expect(MODES.filter(liveChatEnded)).toEqual(["livechat_closed", "livechat_expired", "livechat_cancelled", "livechat_unavailable"]);
  });

  it("a conversation waiting longer than the timeout has expired, from the stored time alone", () => {
    const since = "2026-01-01T00:00:00.000Z";
    const at = (ms: number) => Date.parse(since) + ms;
    expect(modeAt("livechat_waiting", since, at(599_999))).toBe("livechat_waiting");
    expect(modeAt("livechat_waiting", since, at(600_000))).toBe("livechat_expired");
    expect(modeAt("livechat_waiting", since, at(5_000), 5_000)).toBe("livechat_expired");
    expect(modeAt("livechat_active", since, at(86_400_000))).toBe("livechat_active");
    expect(modeAt("bot", since, at(86_400_000))).toBe("bot");
  });
});
