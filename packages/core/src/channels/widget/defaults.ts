import type { WidgetStrings } from "./settings.js";

/** The widget's texts in the languages channelkit ships; any other language starts from English. */
export const DEFAULT_STRINGS: Readonly<Record<string, WidgetStrings>> = {
  en: {
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
    livechat: {
      livechat_waiting: "Connecting you to an agent…",
      livechat_active: "You are talking with an agent.",
      livechat_closed: "The agent closed the conversation.",
      livechat_expired: "No agent is available right now.",
      livechat_cancelled: "You left the queue.",
      livechat_unavailable: "No agent is available right now.",
      leave: "Leave the chat",
      agent: "Agent",
    },
  },
  fr: {
    title: "Discutons",
    subtitle: "Nous répondons en général tout de suite",
    greeting: "Bonjour ! Comment puis-je vous aider ?",
    placeholder: "Votre message…",
    send: "Envoyer",
    retry: "Réessayer",
    open: "Ouvrir la discussion",
    close: "Fermer la discussion",
    suggestions: [],
    errors: {
      network: "La connexion a été perdue. Vérifiez votre réseau et réessayez.",
      origin_not_allowed: "Cette discussion n'est pas activée sur ce site.",
      channel_inactive: "Cette discussion est en pause. Revenez plus tard.",
      channel_archived: "Cette discussion n'est plus disponible.",
      invalid_api_key: "Cette discussion n'est pas configurée correctement.",
      generic: "Une erreur est survenue. Veuillez réessayer.",
    },
    livechat: {
      livechat_waiting: "Mise en relation avec un conseiller…",
      livechat_active: "Vous discutez avec un conseiller.",
      livechat_closed: "Le conseiller a fermé la discussion.",
      livechat_expired: "Aucun conseiller n'est disponible pour le moment.",
      livechat_cancelled: "Vous avez quitté la file d'attente.",
      livechat_unavailable: "Aucun conseiller n'est disponible pour le moment.",
      leave: "Quitter la discussion",
      agent: "Conseiller",
    },
  },
};

/** The default theme and features. */
export const DEFAULT_THEME = { primary_color: "#4338ca", position: "bottom-right", color_scheme: "auto" } as const;
export const DEFAULT_FEATURES = { suggestions: true, history: true } as const;
