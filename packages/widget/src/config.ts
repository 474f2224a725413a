import type { WidgetConfig, WidgetErrorStrings, WidgetStrings } from "./types.js";

/**
 * English texts built into the widget: what it shows before its configuration arrives, when
 * the configuration cannot be loaded (a disallowed origin must still read as a sentence),
 * and for any text a configuration lacks. The same as the server's English defaults.
 */
export const FALLBACK_STRINGS: WidgetStrings = {
  title: "Chat with us",
  subtitle: "We usually answer right away",
  greeting: "Hello! How can I help you?",
  placeholder: "Type your message…",
  send: "Send",
  retry: "Retry",
  open: "Open the chat",
  close: "Close the chat",
  suggestions: [],
  errors: {
    network: "The connection was lost. Check your network and try again.",
    origin_not_allowed: "This chat is not enabled on this website.",
    channel_inactive: "This chat is paused for now. Please come back later.",
    channel_archived: "This chat is no longer available.",
    invalid_api_key: "This chat is not set up correctly.",
    generic: "Something went wrong. Please try again.",
  },
  livechat: {},
};

/** The configuration assumed until (or unless) the service's arrives. */
export const FALLBACK_CONFIG: WidgetConfig = {
  channel_id: "",
  locale: "en_US",
  languages: ["en_US"],
  strings: FALLBACK_STRINGS,
  theme: { primary_color: "#4338ca", position: "bottom-right", color_scheme: "auto" },
  features: { suggestions: true, history: true, livechat: false },
};

type Json = Record<string, unknown>;

function object(value: unknown): Json {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

function nonEmpty(value: unknown): value is string {
  return typeof value === "string" && value.trim() !== "";
}

/** Each text of `fallback`, replaced by the same-named text of `given` when that is one. */
function texts<T extends object>(fallback: T, given: unknown): T {
  const source = object(given);
  const merged: Json = {};
  for (const [name, value] of Object.entries(fallback)) merged[name] = nonEmpty(source[name]) ? source[name] : value;
  return merged as T;
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  return allowed.includes(value as T) ? (value as T) : fallback;
}

function flag(value: unknown, fallback: boolean): boolean {
  return typeof value === "boolean" ? value : fallback;
}

/**
 * The configuration to use from the body of `GET /public/widget/config`, whatever it holds:
 * each missing or malformed field takes its built-in value. The colour is checked strictly
 * because it reaches CSS.
 */
export function resolveConfig(body: unknown): WidgetConfig {
  const raw = object(body);
  const strings = object(raw.strings);
  const theme = object(raw.theme);
  const features = object(raw.features);
  const fallback = FALLBACK_CONFIG;
  return {
    channel_id: typeof raw.channel_id === "string" ? raw.channel_id : fallback.channel_id,
    locale: typeof raw.locale === "string" && /^[a-z]{2}_[A-Z]{2}$/.test(raw.locale) ? raw.locale : fallback.locale,
    languages: Array.isArray(raw.languages) ? raw.languages.filter(nonEmpty) : fallback.languages,
    strings: {
      // The lists and groups read as not-a-text here and are set just below.
      ...texts(FALLBACK_STRINGS, strings),
      suggestions: Array.isArray(strings.suggestions) ? strings.suggestions.filter(nonEmpty).slice(0, 6) : [],
      errors: texts<WidgetErrorStrings>(FALLBACK_STRINGS.errors, strings.errors),
      livechat: Object.fromEntries(Object.entries(object(strings.livechat)).filter(([, value]) => nonEmpty(value))) as Record<string, string>,
    },
    theme: {
      primary_color:
        typeof theme.primary_color === "string" && /^#[0-9a-f]{6}$/i.test(theme.primary_color) ? theme.primary_color : fallback.theme.primary_color,
      position: oneOf(theme.position, ["bottom-right", "bottom-left"], fallback.theme.position),
      color_scheme: oneOf(theme.color_scheme, ["light", "dark", "auto"], fallback.theme.color_scheme),
    },
    features: {
      suggestions: flag(features.suggestions, fallback.features.suggestions),
      history: flag(features.history, fallback.features.history),
      livechat: flag(features.livechat, fallback.features.livechat),
    },
  };
}
