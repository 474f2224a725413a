import { type Connection, cancelLiveChat, type LiveChatMode, loadConfig, loadHistory, resumeChat, startChat } from "./api.js";
import { FALLBACK_STRINGS, resolveConfig } from "./config.js";
import { resolveEndpoint } from "./endpoint.js";
import { asRequestError, errorView, WidgetRequestError } from "./errors.js";
import { conversationStorageKey, pageStorage, readConversation, writeConversation } from "./storage.js";
import { followLiveChat } from "./livechat.js";
import { readReply } from "./stream.js";
import { STYLES } from "./styles.js";
import { textOn } from "./theme.js";
import type { WidgetConfig, WidgetStrings } from "./types.js";
import { applyStrings, createView, liveChatBubble, messageBubble, renderSuggestions, type View } from "./view.js";

// Importing the module where there is no DOM (server rendering, Node) must not throw;
// only defining the element needs one.
const Base = (globalThis.HTMLElement ?? class {}) as typeof HTMLElement;

/** Below this many pixels from the bottom, the log follows a streaming reply. */
const FOLLOW_THRESHOLD = 48;
/** Tries to resume a reply whose connection was lost, waiting 0, 0.5, 1 then 2 s before each. */
const RESUME_ATTEMPTS = 4;

/**
 * `<channelkit-chat key="svc_pub_…" endpoint="https://host" locale="fr_FR">`: a launcher
 * button and a chat panel, in a shadow root, talking to a channelkit service's widget
 * channel. Attributes: `key` (a publishable key), `endpoint` (the service's base URL, the
 * page's origin when absent), `locale` (`xx_XX`, else the service matches the browser's
 * languages); changing one reloads the widget. The host reflects its state in the
 * attributes `ready`, `busy`, `open` and `error` (the failure's code); `open` present when
 * the element is added starts it open.
 */
export class ChannelkitChat extends Base {
  /** The attributes whose changes reload the widget. */
  static readonly observedAttributes = ["key", "endpoint", "locale"];

  #view: View | null = null;
  #config: WidgetConfig | null = null;
  #conversationId: string | null = null;
  /** Aborts everything this connection has in flight: configuration, history, a streamed reply. */
  #session: AbortController | null = null;
  #loadQueued = false;
  #retry: (() => void) | null = null;
  /** User and assistant messages shown, the greeting aside. */
  #messages = 0;
  /** Stops following the conversation's live chat. */
  #following: AbortController | null = null;
  /** The conversation followed, and the turns of the human side's messages already shown. */
  #followed: string | null = null;
  readonly #shownTurns = new Set<number>();
  #mode = "bot";

  /** The conversation the next message continues, once the service has given one. */
  get conversationId(): string | null {
    return this.#conversationId;
  }

  /** Custom element lifecycle: renders once, then loads the configuration. */
  connectedCallback(): void {
    if (!this.#view) this.#render();
    if (!this.#session) this.#queueLoad();
  }

  /** Custom element lifecycle: cancels a streaming reply and any pending request. */
  disconnectedCallback(): void {
    this.#session?.abort();
    this.#session = null;
    this.#unfollow();
    this.#setBusy(false);
  }

  /** Custom element lifecycle: `key`, `endpoint` or `locale` changed. */
  attributeChangedCallback(_name: string, previous: string | null, value: string | null): void {
    if (previous !== value && this.#view && this.isConnected) this.#queueLoad();
  }

  /** Opens the panel and focuses its input. */
  open(): void {
    this.#setOpen(true, true);
  }

  /** Closes the panel. */
  close(): void {
    this.#setOpen(false, false);
  }

  get #strings(): WidgetStrings {
    return this.#config?.strings ?? FALLBACK_STRINGS;
  }

  #render(): void {
    const shadow = this.shadowRoot ?? this.attachShadow({ mode: "open" });
    const view = createView();
    this.#view = view;
    // A constructed style sheet is not an inline style: a page whose CSP forbids inline
    // styles still shows the widget. Where it is missing, a <style> element does.
    if ("adoptedStyleSheets" in shadow && typeof CSSStyleSheet !== "undefined" && "replaceSync" in CSSStyleSheet.prototype) {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(STYLES);
      shadow.adoptedStyleSheets = [sheet];
      shadow.replaceChildren(view.root);
    } else {
      const style = document.createElement("style");
      style.textContent = STYLES;
      shadow.replaceChildren(style, view.root);
    }
    applyStrings(view, FALLBACK_STRINGS);
    view.input.disabled = true;
    view.send.disabled = true;
    // `<channelkit-chat open>` starts open (without taking the focus from the page).
    this.#setOpen(this.hasAttribute("open"), false);

    view.launcher.addEventListener("click", () => this.#setOpen(view.panel.hidden, true));
    view.close.addEventListener("click", () => this.#setOpen(false, true));
    view.root.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || view.panel.hidden) return;
      // Handled here: a dialog of the page around the widget must not close as well.
      event.preventDefault();
      event.stopPropagation();
      this.#setOpen(false, true);
    });
    view.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#submit(view.input.value);
    });
    view.input.addEventListener("keydown", (event) => {
      // Enter sends, Shift+Enter is a new line; Enter that ends an IME composition is not a send.
      if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      this.#submit(view.input.value);
    });
    view.suggestions.addEventListener("click", (event) => {
      const button = (event.target as Element).closest("button");
      if (button) this.#submit(button.textContent ?? "");
    });
    view.leave.addEventListener("click", () => void this.#leave());
    view.retry.addEventListener("click", () => {
      const retry = this.#retry;
      this.#clearError();
      // The Retry button disappears: focus stays in the panel rather than falling to the page.
      (view.input.disabled ? view.close : view.input).focus();
      retry?.();
    });
  }

  /** Reloads once for any number of attribute changes in one task. */
  #queueLoad(): void {
    this.#session?.abort();
    this.#session = new AbortController();
    if (this.#loadQueued) return;
    this.#loadQueued = true;
    queueMicrotask(() => {
      this.#loadQueued = false;
      if (this.isConnected && this.#session) void this.#load(this.#session.signal);
    });
  }

  #connection(): Connection | null {
    const key = this.getAttribute("key")?.trim();
    if (!key) return null;
    try {
      return { key, endpoint: resolveEndpoint(this.getAttribute("endpoint"), location.href) };
    } catch {
      return null;
    }
  }

  async #load(signal: AbortSignal): Promise<void> {
    const view = this.#view as View;
    this.#reset();
    try {
      const connection = this.#connection();
      if (!connection) throw new WidgetRequestError(401, "missing_api_key");
      const config = resolveConfig(await loadConfig(connection, this.getAttribute("locale"), signal));
      signal.throwIfAborted();
      this.#apply(config);
      if (config.features.history) await this.#restore(connection, signal);
      this.#refreshSuggestions();
      view.root.dataset.state = "ready";
      this.toggleAttribute("ready", true);
    } catch (error) {
      if (signal.aborted) return;
      view.root.dataset.state = "failed";
      // Nothing can be sent: the composer goes, rather than showing an input that does nothing.
      view.form.hidden = true;
      this.#showError(asRequestError(error), () => this.#queueLoad());
      // Shown without a click: a site owner who embedded the widget wrongly must see why.
      // Focus stays on the page, which the visitor did not leave.
      this.#setOpen(true, false);
    }
  }

  #reset(): void {
    const view = this.#view as View;
    for (const message of view.log.querySelectorAll("[data-role]")) if (message !== view.greeting) message.remove();
    view.greeting.hidden = true;
    view.suggestions.hidden = true;
    view.input.disabled = true;
    this.#config = null;
    this.#conversationId = null;
    this.#messages = 0;
    this.#unfollow();
    this.#showMode({ mode: "bot", statusMessage: null });
    this.#clearError();
    this.#setBusy(false);
    this.removeAttribute("ready");
  }

  #apply(config: WidgetConfig): void {
    const view = this.#view as View;
    this.#config = config;
    const { root } = view;
    root.lang = config.locale.replace("_", "-");
    root.dataset.scheme = config.theme.color_scheme;
    root.dataset.position = config.theme.position;
    // Defaults of --channelkit-primary / --channelkit-on-primary, which the page may override.
    root.style.setProperty("--_config-primary", config.theme.primary_color);
    root.style.setProperty("--_config-on-primary", textOn(config.theme.primary_color));
    applyStrings(view, config.strings);
    renderSuggestions(view, config.strings.suggestions);
    view.greeting.hidden = false;
    view.form.hidden = false;
    view.input.disabled = false;
    view.send.disabled = false;
    this.#setOpen(!view.panel.hidden, false);
  }

  /** Shows the remembered conversation again; a conversation the service no longer has is forgotten. */
  async #restore(connection: Connection, signal: AbortSignal): Promise<void> {
    const stored = readConversation(pageStorage(), conversationStorageKey(connection.endpoint, connection.key));
    if (stored === null) return;
    let messages: Awaited<ReturnType<typeof loadHistory>>;
    try {
      messages = await loadHistory(connection, stored, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      // A passing failure: the conversation goes on, only its earlier messages are not shown.
      this.#conversationId = stored;
      this.#watch(connection, stored, null);
      return;
    }
    signal.throwIfAborted();
    if (messages === null) {
      this.#remember(connection, null);
      return;
    }
    this.#conversationId = stored;
    for (const message of messages.messages) {
      if (message.sender) this.#appendLiveChat(message.sender, message.content);
      else this.#append(message.role, message.content);
    }
    this.#showMode(messages.livechat);
    this.#watch(connection, stored, messages.lastTurn);
    // Ending with the user's message, the conversation may have its reply streaming still (the
    // page was reloaded mid-reply, on a channel whose runs outlive their connection): shown if so.
    const last = messages.messages.at(-1);
    if (last?.role === "user") void this.#send(last.content, "load");
  }

  #submit(text: string): void {
    const view = this.#view;
    const payload = text.trim();
    if (!view || !payload || !this.#config || view.input.disabled || this.hasAttribute("busy")) return;
    view.input.value = "";
    this.#append("user", payload);
    // The send button or suggestion that was used is about to be disabled: keep the focus in the composer.
    if (!view.panel.hidden) view.input.focus();
    void this.#send(payload);
  }

  /**
   * Sends `payload` and shows the reply as it streams; a connection lost once the service has
   * the run resumes it (see `#resume`) rather than failing. With `resume`, first looks for the
   * conversation's run in flight and shows it instead: `"load"` (on a reload) then does
   * nothing more; `"lost"` (Retry after a lost reply, whose `bubbles` the resumed reply
   * replaces) sends `payload` again when no run is in flight any more.
   */
  async #send(payload: string, resume?: "load" | "lost", bubbles = new Map<string, HTMLDivElement>()): Promise<void> {
    const view = this.#view;
    const connection = this.#connection();
    const signal = this.#session?.signal;
    if (!view || !connection || !signal) return;
    this.#clearError();
    this.#setBusy(true);
    let resend = false;
    let accepted = resume !== undefined;
    try {
      if (!(resume && (await this.#resume(connection, bubbles, signal, resume === "lost"))) && resume !== "load") {
        // A new run: the bubbles of the lost one stay, incomplete.
        bubbles = new Map();
        const conversation = this.#conversationId;
        const body = await startChat(connection, conversation === null ? { payload } : { payload, conversation_id: conversation }, signal);
        accepted = true;
        try {
          await this.#play(connection, body, bubbles);
        } catch (error) {
          if (signal.aborted || asRequestError(error).status !== 0 || !(await this.#resume(connection, bubbles, signal, true))) throw error;
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      for (const bubble of bubbles.values()) bubble.dataset.incomplete = "";
      const failure = asRequestError(error);
      if (this.#conversationId !== null && (failure.code === "conversation_not_found" || failure.code === "conversation_forbidden")) {
        // The remembered conversation is gone (deleted, another channel's): start a new one.
        this.#remember(connection, null);
        resend = true;
      } else {
        // A reply lost on the way may be running still: Retry looks for it first.
        this.#showError(failure, () => void (accepted && failure.status === 0 ? this.#send(payload, "lost", bubbles) : this.#send(payload)));
      }
    } finally {
      if (!signal.aborted) this.#setBusy(false);
    }
    if (resend) await this.#send(payload);
  }

  /** Shows a reply's stream as it arrives; throws when it fails or ends before its `finish` (a lost connection). */
  async #play(connection: Connection, body: ReadableStream<Uint8Array>, bubbles: Map<string, HTMLDivElement>): Promise<void> {
    const view = this.#view as View;
    const outcome = await readReply(body, {
      conversation: (id) => this.#remember(connection, id),
      start: (id) => {
        view.typing.hidden = true;
        bubbles.set(id, this.#append("assistant", ""));
      },
      // One text node per bubble, grown in place: no markup is ever parsed from a reply.
      delta: (id, text) => this.#follow(() => (bubbles.get(id)?.firstChild as Text | null)?.appendData(text)),
    });
    if (outcome.status === "failed") throw new WidgetRequestError(200, "stream_error");
    if (outcome.status === "cut") throw new WidgetRequestError(0, "network");
    this.#announce(outcome.replies.join("\n\n"));
  }

  /**
   * Shows the conversation's run in flight (on a channel with resumable streams, a run goes on
   * without its connection), from the start of its stream: the resume route replays it whole,
   * so the reply's bubbles are drawn again. Retries a few times while the connection is lost
   * (`lost`: it was, the loss is then thrown when the resume fails). True once the reply is
   * shown whole; false when no run is in flight (204: ended, cancelled with its connection, or
   * none), which says nothing of how it ended, so a lost reply is never taken as complete.
   */
  async #resume(connection: Connection, bubbles: Map<string, HTMLDivElement>, signal: AbortSignal, lost: boolean): Promise<boolean> {
    const conversation = this.#conversationId;
    if (conversation === null) return false;
    for (let attempt = 1; ; attempt++) {
      try {
        const body = await resumeChat(connection, conversation, signal);
        if (!body) return false;
        for (const bubble of bubbles.values()) bubble.remove();
        bubbles.clear();
        lost = true;
        await this.#play(connection, body, bubbles);
        return true;
      } catch (error) {
        const { status, code } = asRequestError(error);
        if (signal.aborted || code === "stream_error") throw error;
        // Offline, a restarting or overloaded service pass; a refusal does not.
        if (attempt >= RESUME_ATTEMPTS || (status > 0 && status < 500 && status !== 429)) break;
      }
      await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
    }
    if (lost) throw new WidgetRequestError(0, "network");
    return false;
  }

  #remember(connection: Connection, conversationId: string | null): void {
    this.#conversationId = conversationId;
    writeConversation(pageStorage(), conversationStorageKey(connection.endpoint, connection.key), conversationId);
    if (conversationId === null) this.#unfollow();
    // A new conversation is followed from now: a handover during this very run shows at once.
    else if (this.#followed !== conversationId) this.#watch(connection, conversationId, null);
  }

  /** Follows the conversation's live chat (when the channel offers it): the human side's messages and the mode, live. */
  #watch(connection: Connection, conversationId: string, afterTurn: number | null): void {
    if (!this.#config?.features.livechat || this.#followed === conversationId) return;
    this.#unfollow();
    const following = new AbortController();
    this.#following = following;
    this.#followed = conversationId;
    void followLiveChat(
      connection,
      conversationId,
      afterTurn,
      {
        mode: (mode) => this.#showMode(mode),
        message: ({ turn, sender, content }) => {
          if (this.#shownTurns.has(turn)) return;
          this.#shownTurns.add(turn);
          this.#follow(() => this.#appendLiveChat(sender, content));
          this.#announce(content);
        },
      },
      following.signal,
    );
  }

  #unfollow(): void {
    this.#following?.abort();
    this.#following = null;
    this.#followed = null;
    this.#shownTurns.clear();
  }

  /** The live chat's bar: the status of its mode (the channel's message, else the widget's text), hidden in bot mode. */
  #showMode({ mode, statusMessage }: LiveChatMode): void {
    const view = this.#view;
    if (!view) return;
    this.#mode = mode;
    const text = statusMessage ?? this.#strings.livechat[mode] ?? "";
    view.livechat.hidden = mode === "bot" || text === "";
    view.livechatStatus.textContent = text;
    view.leave.hidden = mode !== "livechat_waiting" && mode !== "livechat_active";
    if (mode === "bot") delete view.root.dataset.livechat;
    else view.root.dataset.livechat = mode;
  }

  /** Leaves the queue or ends the live chat. */
  async #leave(): Promise<void> {
    const connection = this.#connection();
    const conversation = this.#conversationId;
    const signal = this.#session?.signal;
    if (!connection || conversation === null || !signal || (this.#mode !== "livechat_waiting" && this.#mode !== "livechat_active")) return;
    this.#clearError();
    try {
      this.#showMode(await cancelLiveChat(connection, conversation, signal));
    } catch (error) {
      if (signal.aborted) return;
      this.#showError(asRequestError(error), () => void this.#leave());
    }
  }

  #appendLiveChat(sender: string, text: string): HTMLDivElement {
    const view = this.#view as View;
    const label = sender === "agent" ? (this.#strings.livechat.agent ?? "Agent") : sender.charAt(0).toUpperCase() + sender.slice(1);
    const bubble = liveChatBubble(label, text, sender);
    view.log.insertBefore(bubble, view.typing);
    this.#messages++;
    view.suggestions.hidden = true;
    return bubble;
  }

  #append(role: "user" | "assistant", text: string): HTMLDivElement {
    const view = this.#view as View;
    const bubble = messageBubble(role, text);
    view.log.insertBefore(bubble, view.typing);
    this.#messages++;
    view.suggestions.hidden = true;
    view.log.scrollTop = view.log.scrollHeight;
    return bubble;
  }

  /** Runs an update of the log, and keeps the newest text in view unless the reader scrolled up. */
  #follow(update: () => void): void {
    const { log } = this.#view as View;
    const following = log.scrollHeight - log.scrollTop - log.clientHeight < FOLLOW_THRESHOLD;
    update();
    if (following) log.scrollTop = log.scrollHeight;
  }

  #refreshSuggestions(): void {
    const view = this.#view as View;
    const config = this.#config;
    view.suggestions.hidden = !(config?.features.suggestions && config.strings.suggestions.length > 0 && this.#messages === 0);
  }

  #setOpen(open: boolean, focus: boolean): void {
    const view = this.#view;
    if (!view) return;
    view.panel.hidden = !open;
    view.launcher.setAttribute("aria-expanded", String(open));
    view.launcher.setAttribute("aria-label", open ? this.#strings.close : this.#strings.open);
    view.openIcon.toggleAttribute("hidden", open);
    view.closeIcon.toggleAttribute("hidden", !open);
    this.toggleAttribute("open", open);
    if (open) view.log.scrollTop = view.log.scrollHeight;
    if (!focus) return;
    if (!open) view.launcher.focus();
    else if (!view.input.disabled) view.input.focus();
    else (view.retry.hidden ? view.close : view.retry).focus();
  }

  #setBusy(busy: boolean): void {
    const view = this.#view;
    if (!view) return;
    this.toggleAttribute("busy", busy);
    view.send.disabled = busy || this.#config === null;
    view.log.setAttribute("aria-busy", String(busy));
    for (const button of view.suggestions.querySelectorAll("button")) button.disabled = busy;
    view.typing.hidden = !busy;
    if (busy) view.log.scrollTop = view.log.scrollHeight;
  }

  /** Reads the completed reply once to screen readers (the log itself is silent while it streams). */
  #announce(text: string): void {
    const { announcer } = this.#view as View;
    announcer.textContent = "";
    // A change after an emptied region is what makes the same words be read twice in a row.
    setTimeout(() => {
      announcer.textContent = text;
    }, 50);
  }

  #showError(failure: WidgetRequestError, retry: () => void): void {
    const view = this.#view as View;
    const shown = errorView(failure, this.#strings.errors);
    view.alert.textContent = shown.message;
    delete view.problem.dataset.empty;
    this.#retry = shown.retry ? retry : null;
    view.retry.hidden = !shown.retry;
    this.setAttribute("error", failure.code);
  }

  #clearError(): void {
    const view = this.#view;
    if (!view) return;
    view.alert.textContent = "";
    view.problem.dataset.empty = "";
    view.retry.hidden = true;
    this.#retry = null;
    this.removeAttribute("error");
  }
}

declare global {
  interface HTMLElementTagNameMap {
    "channelkit-chat": ChannelkitChat;
  }
}
