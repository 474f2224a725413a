import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, generateId, type UIMessage } from "ai";
import { type FormEvent, useEffect, useMemo, useState } from "react";

/**
 * The AI SDK's own `useChat`, unchanged, against channelkit's widget channel: the transport
 * only says where the route is and which publishable key to send. The endpoint and the key
 * come from the page's query string: `?endpoint=http://127.0.0.1:3000&key=svc_pub_…`.
 *
 * The chat survives a reload: its id is kept in localStorage, its messages come back from
 * channelkit's history, and `resume: true` reconnects to a reply still streaming (on a channel
 * with resumable streams, whose runs go on when the page goes away).
 */
export function App() {
  const params = new URLSearchParams(window.location.search);
  const endpoint = params.get("endpoint")?.replace(/\/+$/, "");
  const key = params.get("key");
  if (!endpoint || !key) {
    return (
      <main>
        <h1>useChat against channelkit</h1>
        <p data-testid="missing">
          Open this page with <code>?endpoint=http://127.0.0.1:3000&amp;key=svc_pub_…</code> (a publishable key whose channel allows this page's origin).
        </p>
      </main>
    );
  }
  return <Restored endpoint={endpoint} apiKey={key} />;
}

/** What the page keeps across reloads, per endpoint and key: the chat id, and its channelkit conversation once known. */
interface Saved {
  chatId: string;
  conversationId?: string;
}

function storageKey(endpoint: string, apiKey: string): string {
  return `channelkit-example:chat:${endpoint}|${apiKey}`;
}

function load(endpoint: string, apiKey: string): Saved {
  try {
    const saved = JSON.parse(localStorage.getItem(storageKey(endpoint, apiKey)) ?? "null") as Saved | null;
    if (typeof saved?.chatId === "string") return saved;
  } catch {
    // Nothing usable kept: a new chat.
  }
  return save(endpoint, apiKey, { chatId: generateId() });
}

function save(endpoint: string, apiKey: string, saved: Saved): Saved {
  localStorage.setItem(storageKey(endpoint, apiKey), JSON.stringify(saved));
  return saved;
}

/**
 * The conversation's messages as `useChat` holds them, from channelkit's history route
 * (`GET /public/v1/api/conversations/{id}/messages`, with the same publishable key); null when
 * channelkit no longer has the conversation.
 */
async function history(endpoint: string, apiKey: string, conversationId: string): Promise<UIMessage[] | null> {
  const response = await fetch(`${endpoint}/public/v1/api/conversations/${encodeURIComponent(conversationId)}/messages?limit=200`, {
    headers: { Authorization: `Bearer ${apiKey}` },
  });
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`history: HTTP ${response.status}`);
  const { messages } = (await response.json()) as { messages: { role: string; content: unknown; turn_index: number }[] };
  return messages.flatMap((message, index) =>
    (message.role === "user" || message.role === "assistant") && typeof message.content === "string" && message.content !== ""
      ? [{ id: `history-${message.turn_index}-${index}`, role: message.role, parts: [{ type: "text" as const, text: message.content }] }]
      : [],
  );
}

/** Loads the kept chat and its history, then shows it: `useChat` takes its initial messages once, when it is created. */
function Restored({ endpoint, apiKey }: { endpoint: string; apiKey: string }) {
  const [restored, setRestored] = useState<{ saved: Saved; messages: UIMessage[] } | null>(null);
  useEffect(() => {
    let saved = load(endpoint, apiKey);
    const ready = (messages: UIMessage[]) => setRestored({ saved, messages });
    if (!saved.conversationId) return ready([]);
    history(endpoint, apiKey, saved.conversationId).then(
      (messages) => {
        // channelkit no longer has the conversation: a new chat.
        if (messages === null) saved = save(endpoint, apiKey, { chatId: generateId() });
        ready(messages ?? []);
      },
      // The history could not be read: the chat goes on, without its earlier messages.
      () => ready([]),
    );
  }, [endpoint, apiKey]);
  if (!restored) return <p data-testid="loading">Loading…</p>;
  return <Chat endpoint={endpoint} apiKey={apiKey} saved={restored.saved} initialMessages={restored.messages} />;
}

/** channelkit's first event, `data-run`, arrives as a data part: the conversation's id. */
function conversationOf(messages: UIMessage[]): string | null {
  for (const message of messages) {
    for (const part of message.parts) {
      if (part.type === "data-run") return (part.data as { conversation_id: string }).conversation_id;
    }
  }
  return null;
}

function Chat({ endpoint, apiKey, saved, initialMessages }: { endpoint: string; apiKey: string; saved: Saved; initialMessages: UIMessage[] }) {
  const api = `${endpoint}/public/widget/chat`;
  const transport = useMemo(() => new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${apiKey}` } }), [api, apiKey]);
  const { messages, sendMessage, status, error, stop } = useChat({
    // The same chat id after a reload: `resume` reconnects to GET {api}/{id}/stream
    // (204 when no reply is streaming), and channelkit continues the same conversation.
    id: saved.chatId,
    messages: initialMessages,
    resume: true,
    transport,
    onData: (part) => {
      if (part.type === "data-run") save(endpoint, apiKey, { ...saved, conversationId: (part.data as { conversation_id: string }).conversation_id });
    },
  });
  const [input, setInput] = useState("");

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!input.trim()) return;
    void sendMessage({ text: input });
    setInput("");
  }

  function stopReply() {
    // With resumable streams, closing the connection no longer stops the run: ask channelkit to.
    void fetch(`${api}/${encodeURIComponent(saved.chatId)}/cancel`, { method: "POST", headers: { Authorization: `Bearer ${apiKey}` } });
    void stop();
  }

  function newChat() {
    save(endpoint, apiKey, { chatId: generateId() });
    window.location.reload();
  }

  return (
    <main>
      <h1>useChat against channelkit</h1>
      <ul data-testid="messages" aria-live="polite">
        {messages.map((message) => (
          <li key={message.id} data-testid="message" data-role={message.role}>
            {message.parts.map((part) => (part.type === "text" ? part.text : "")).join("")}
          </li>
        ))}
      </ul>
      <form data-testid="form" onSubmit={submit}>
        <label>
          Message <input data-testid="input" value={input} onChange={(event) => setInput(event.target.value)} />
        </label>
        <button data-testid="send" type="submit" disabled={status === "submitted" || status === "streaming"}>
          Send
        </button>
        <button data-testid="stop" type="button" onClick={stopReply} disabled={status !== "streaming"}>
          Stop
        </button>
        <button data-testid="new-chat" type="button" onClick={newChat}>
          New chat
        </button>
      </form>
      <p>
        Status: <span data-testid="status">{status}</span>
      </p>
      <p>
        Conversation: <span data-testid="conversation">{conversationOf(messages) ?? saved.conversationId ?? "none yet"}</span>
      </p>
      {error ? (
        <p role="alert" data-testid="error">
          {error.message}
        </p>
      ) : null}
    </main>
  );
}
