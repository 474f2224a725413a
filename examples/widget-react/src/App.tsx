import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, type UIMessage } from "ai";
import { type FormEvent, useMemo, useState } from "react";

/**
 * The AI SDK's own `useChat`, unchanged, against channelkit's widget channel: the transport
 * only says where the route is and which publishable key to send. The endpoint and the key
 * come from the page's query string: `?endpoint=http://127.0.0.1:3000&key=svc_pub_…`.
 */
export function App() {
  const params = new URLSearchParams(window.location.search);
  const endpoint = params.get("endpoint");
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
  return <Chat endpoint={endpoint} apiKey={key} />;
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

function Chat({ endpoint, apiKey }: { endpoint: string; apiKey: string }) {
  const transport = useMemo(
    () => new DefaultChatTransport({ api: `${endpoint.replace(/\/+$/, "")}/public/widget/chat`, headers: { Authorization: `Bearer ${apiKey}` } }),
    [endpoint, apiKey],
  );
  const { messages, sendMessage, status, error, stop } = useChat({ transport });
  const [input, setInput] = useState("");

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!input.trim()) return;
    void sendMessage({ text: input });
    setInput("");
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
        <button type="button" onClick={() => void stop()} disabled={status !== "streaming"}>
          Stop
        </button>
      </form>
      <p>
        Status: <span data-testid="status">{status}</span>
      </p>
      <p>
        Conversation: <span data-testid="conversation">{conversationOf(messages) ?? "none yet"}</span>
      </p>
      {error ? (
        <p role="alert" data-testid="error">
          {error.message}
        </p>
      ) : null}
    </main>
  );
}
