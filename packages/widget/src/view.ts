import { h, icon } from "./dom.js";
import type { WidgetStrings } from "./types.js";

const CHAT_ICON = '<path d="M21 12a8 8 0 0 1-11.6 7.1L4 20l1-4.6A8 8 0 1 1 21 12z"/>';
const CLOSE_ICON = '<path d="M6 6l12 12M18 6L6 18"/>';

/** The parts of the widget's shadow DOM the element updates. */
export interface View {
  root: HTMLDivElement;
  launcher: HTMLButtonElement;
  openIcon: Element;
  closeIcon: Element;
  panel: HTMLDivElement;
  title: HTMLHeadingElement;
  subtitle: HTMLParagraphElement;
  close: HTMLButtonElement;
  log: HTMLDivElement;
  greeting: HTMLDivElement;
  typing: HTMLDivElement;
  suggestions: HTMLDivElement;
  problem: HTMLDivElement;
  alert: HTMLParagraphElement;
  retry: HTMLButtonElement;
  form: HTMLFormElement;
  input: HTMLTextAreaElement;
  send: HTMLButtonElement;
  announcer: HTMLDivElement;
  /** The live chat's bar: its status and the leave button, hidden while the bot has the conversation. */
  livechat: HTMLDivElement;
  livechatStatus: HTMLParagraphElement;
  leave: HTMLButtonElement;
}

/** A hook for the page's tests and styles: the same name as `part` and `data-testid`. */
function hook(name: string, extra = name) {
  return { part: extra, "data-testid": name };
}

/** A chat bubble; its text is set as text, so replies can never inject markup. */
export function messageBubble(role: "user" | "assistant", text: string): HTMLDivElement {
  return h("div", { class: "message", "data-role": role, ...hook("message", `message ${role}`) }, text);
}

/** A message of the human side of a live chat, under its sender's label; text only, as every bubble. */
export function liveChatBubble(label: string, text: string, sender: string): HTMLDivElement {
  const bubble = h("div", { class: "message", "data-role": "assistant", "data-sender": sender, ...hook("livechat-message", "message livechat") });
  bubble.append(h("span", { class: "sender" }, label), text);
  return bubble;
}

/**
 * Builds the widget's DOM, closed and empty. The launcher comes first so that Tab goes from
 * it into the open panel; the panel is a non-modal dialog (the page stays usable).
 */
export function createView(): View {
  const openIcon = icon(CHAT_ICON);
  const closeIcon = icon(CLOSE_ICON);
  const launcher = h(
    "button",
    { type: "button", class: "launcher", "aria-expanded": "false", "aria-controls": "channelkit-panel", ...hook("launcher") },
    openIcon,
    closeIcon,
  );
  const title = h("h2", { class: "title", id: "channelkit-title", ...hook("title") });
  const subtitle = h("p", { class: "subtitle", id: "channelkit-subtitle", ...hook("subtitle") });
  const close = h("button", { type: "button", class: "close", ...hook("close") }, icon(CLOSE_ICON));
  const greeting = messageBubble("assistant", "");
  greeting.dataset.greeting = "";
  greeting.hidden = true;
  const typing = h("div", { class: "typing", "aria-hidden": "true", hidden: true, ...hook("typing") }, h("span"), h("span"), h("span"));
  // role=log is implicitly a polite live region: switched off, or a screen reader would read
  // every streamed token; the announcer below reads each completed reply instead.
  const log = h("div", { class: "log", role: "log", "aria-live": "off", tabindex: "0", ...hook("log") }, greeting, typing);
  const suggestions = h("div", { class: "suggestions", hidden: true, ...hook("suggestions") });
  const alert = h("p", { class: "alert", role: "alert", ...hook("error") });
  const retry = h("button", { type: "button", class: "retry", hidden: true, ...hook("retry") });
  const problem = h("div", { class: "problem", "data-empty": true }, alert, retry);
  const livechatStatus = h("p", { class: "livechat-status", role: "status", ...hook("livechat-status") });
  const leave = h("button", { type: "button", class: "leave", hidden: true, ...hook("livechat-leave") });
  const livechat = h("div", { class: "livechat", hidden: true, ...hook("livechat") }, livechatStatus, leave);
  const input = h("textarea", { class: "input", rows: "1", maxlength: "10000", autocomplete: "off", ...hook("input") });
  const send = h("button", { type: "submit", class: "send", ...hook("send") });
  const form = h("form", { class: "composer", ...hook("composer") }, input, send);
  const panel = h(
    "div",
    {
      class: "panel",
      id: "channelkit-panel",
      role: "dialog",
      "aria-labelledby": "channelkit-title",
      "aria-describedby": "channelkit-subtitle",
      hidden: true,
      ...hook("panel"),
    },
    h("div", { class: "header", part: "header" }, h("div", { class: "heading" }, title, subtitle), close),
    log,
    suggestions,
    livechat,
    problem,
    form,
  );
  const announcer = h("div", { class: "sr-only", "aria-live": "polite", ...hook("announcer") });
  const root = h("div", { class: "root", lang: "en", "data-scheme": "auto", "data-position": "bottom-right" }, launcher, panel, announcer);
  return {
    root,
    launcher,
    openIcon,
    closeIcon,
    panel,
    title,
    subtitle,
    close,
    log,
    greeting,
    typing,
    suggestions,
    problem,
    alert,
    retry,
    form,
    input,
    send,
    announcer,
    livechat,
    livechatStatus,
    leave,
  };
}

/** Writes the configuration's texts into the view. */
export function applyStrings(view: View, strings: WidgetStrings): void {
  view.title.textContent = strings.title;
  view.subtitle.textContent = strings.subtitle;
  view.greeting.textContent = strings.greeting;
  view.close.setAttribute("aria-label", strings.close);
  view.input.placeholder = strings.placeholder;
  view.input.setAttribute("aria-label", strings.placeholder);
  view.send.textContent = strings.send;
  view.retry.textContent = strings.retry;
  view.leave.textContent = strings.livechat.leave ?? "Leave the chat";
}

/** Replaces the starter suggestions with one button per prompt. */
export function renderSuggestions(view: View, prompts: readonly string[]): void {
  view.suggestions.replaceChildren(...prompts.map((prompt) => h("button", { type: "button", class: "suggestion", ...hook("suggestion") }, prompt)));
}
