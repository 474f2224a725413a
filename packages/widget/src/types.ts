/**
 * The widget's view of `GET /public/widget/config`: what it reads of the answer. The
 * server's own types live in `@channelkit/core`; these are the client's, so the browser
 * bundle depends on nothing of the server (`config.test.ts` checks they stay compatible).
 */

/** Messages shown for each failure the widget tells apart. */
export interface WidgetErrorStrings {
  network: string;
  origin_not_allowed: string;
  channel_inactive: string;
  channel_archived: string;
  invalid_api_key: string;
  generic: string;
}

/** The widget's texts in one language. */
export interface WidgetStrings {
  title: string;
  subtitle: string;
  /** The first bot bubble; shown only, never sent. */
  greeting: string;
  placeholder: string;
  send: string;
  retry: string;
  /** Label of the launcher while the panel is closed. */
  open: string;
  /** Label of the launcher and of the close button while the panel is open. */
  close: string;
  /** Starter prompts, shown while the conversation is empty. */
  suggestions: string[];
  errors: WidgetErrorStrings;
  /** Live-chat texts: a status per mode, `leave` (the button) and `agent` (the human side's label). */
  livechat: Partial<Record<string, string>>;
}

/** Colours and placement. */
export interface WidgetTheme {
  /** `#rrggbb`. */
  primary_color: string;
  position: "bottom-right" | "bottom-left";
  /** `auto` follows the visitor's `prefers-color-scheme`. */
  color_scheme: "light" | "dark" | "auto";
}

/** What the widget offers. */
export interface WidgetFeatures {
  suggestions: boolean;
  history: boolean;
  livechat: boolean;
}

/** A channel's widget configuration in one language, completed with the built-in defaults. */
export interface WidgetConfig {
  channel_id: string;
  /** `xx_XX`. */
  locale: string;
  languages: string[];
  strings: WidgetStrings;
  theme: WidgetTheme;
  features: WidgetFeatures;
}
