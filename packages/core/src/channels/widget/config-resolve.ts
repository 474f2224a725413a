import { DEFAULT_FEATURES, DEFAULT_STRINGS, DEFAULT_THEME } from "./defaults.js";
import { type WidgetSettings, type WidgetStrings, widgetSettingsSchema } from "./settings.js";
import type { ChannelRecord } from "../../plugin/api.js";

/**
 * The channel language to answer in: the requested locale when the channel has it, else the
 * best match of `Accept-Language` (an exact `en-US`, then the first channel language of the
 * same language `en`, in the header's order of preference), else the channel's first.
 */
export function resolveLocale(languages: readonly string[], requested: string | null, acceptLanguage: string | null): string {
  const fallback = languages[0] ?? "en_US";
  if (requested !== null && languages.includes(requested)) return requested;
  for (const tag of preferredTags(acceptLanguage)) {
    const [language, region] = tag.split("-");
    if (!language) continue;
    if (region) {
      const exact = `${language.toLowerCase()}_${region.toUpperCase()}`;
      if (languages.includes(exact)) return exact;
    }
    const sameLanguage = languages.find((code) => code.startsWith(`${language.toLowerCase()}_`));
    if (sameLanguage) return sameLanguage;
  }
  return fallback;
}

/** The tags of an `Accept-Language` header, most preferred first (`q=0` left out). */
function preferredTags(header: string | null): string[] {
  if (!header) return [];
  return header
    .split(",")
    .map((entry, index) => {
      const [tag = "", ...params] = entry.trim().split(";");
      const q = params.map((param) => /^\s*q=([\d.]+)\s*$/.exec(param)?.[1]).find((value) => value !== undefined);
      return { tag: tag.trim(), q: q === undefined ? 1 : Number(q), index };
    })
    .filter((entry) => entry.tag !== "" && entry.tag !== "*" && entry.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index)
    .map((entry) => entry.tag);
}

/**
 * The widget configuration of a channel in `locale`: the defaults of that language (English
 * for a language channelkit does not ship), overlaid with the channel's settings. The
 * `livechat` feature is on by default when the service has a live-chat provider.
 */
export function widgetConfig(channel: ChannelRecord, locale: string, liveChat: boolean) {
  // Stored settings were validated when set; parsing again keeps a hand-edited row from
  // reaching a page as anything but the schema's shape.
  const parsed = widgetSettingsSchema.safeParse(channel.widget);
  const settings: WidgetSettings = parsed.success ? parsed.data : {};
  const base = DEFAULT_STRINGS[locale.slice(0, 2)] ?? (DEFAULT_STRINGS.en as WidgetStrings);
  const own = settings.strings?.[locale] ?? {};
  const strings: WidgetStrings = {
    ...base,
    ...own,
    errors: { ...base.errors, ...own.errors },
    livechat: { ...base.livechat, ...own.livechat },
  };
  return {
    channel_id: channel.id,
    locale,
    languages: channel.languages,
    strings,
    theme: { ...DEFAULT_THEME, ...settings.theme },
    features: { ...DEFAULT_FEATURES, livechat: liveChat, ...settings.features },
    default_stream: channel.defaultStream,
  };
}
