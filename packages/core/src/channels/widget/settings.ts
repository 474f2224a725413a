import { z } from "zod";

const localeCode = z.string().regex(/^[a-z]{2}_[A-Z]{2}$/, "widget strings are keyed by language codes of the form xx_XX, e.g. en_US");
const text = (max = 500) => z.string().min(1).max(max);

/** The widget's texts in one language; a channel overrides any of them. */
export const widgetStringsSchema = z.strictObject({
  title: text(120),
  subtitle: text(200),
  greeting: text(),
  placeholder: text(120),
  send: text(40),
  retry: text(40),
  open: text(60),
  close: text(60),
  /** Starter prompts shown before the first message, when `features.suggestions` is on. */
  suggestions: z.array(text(200)).max(6),
  errors: z.strictObject({
    network: text(),
    origin_not_allowed: text(),
    channel_inactive: text(),
    channel_archived: text(),
    invalid_api_key: text(),
    generic: text(),
  }),
  livechat: z.strictObject({
    livechat_waiting: text(),
    livechat_active: text(),
    livechat_closed: text(),
    livechat_expired: text(),
    livechat_cancelled: text(),
    livechat_unavailable: text(),
    /** The button that leaves the queue or ends the live chat. */
    leave: text(),
    /** The label of the human side's messages. */
    agent: text(),
  }),
});

/** The widget's texts in one language, as `GET /public/widget/config` answers them. */
export type WidgetStrings = z.infer<typeof widgetStringsSchema>;

/** Colours and placement. */
export const widgetThemeSchema = z.strictObject({
  primary_color: z.string().regex(/^#[0-9a-fA-F]{6}$/, "primary_color is a colour such as #4f46e5"),
  position: z.enum(["bottom-right", "bottom-left"]),
  color_scheme: z.enum(["light", "dark", "auto"]),
});

/** What the widget offers. */
export const widgetFeaturesSchema = z.strictObject({
  /** Starter suggestions before the first message. */
  suggestions: z.boolean(),
  /** Restores the conversation after a reload, with the history route. */
  history: z.boolean(),
  /** Shows the live chat: the human side's messages, its status and a leave button (default: on when the service has a live-chat provider). */
  livechat: z.boolean(),
});

/**
 * A channel's widget settings: what it overrides of the defaults, every field optional.
 * Strings are given per language (only the texts that change); unknown fields are refused.
 */
export const widgetSettingsSchema = z.strictObject({
  strings: z
    .record(
      localeCode,
      widgetStringsSchema.partial().extend({
        errors: widgetStringsSchema.shape.errors.partial().optional(),
        livechat: widgetStringsSchema.shape.livechat.partial().optional(),
      }),
    )
    .optional(),
  theme: widgetThemeSchema.partial().optional(),
  features: widgetFeaturesSchema.partial().optional(),
});

/** A channel's widget settings, as set through the admin (`widget`). */
export type WidgetSettings = z.input<typeof widgetSettingsSchema>;
