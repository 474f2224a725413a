// An agent console on channelkit's live-chat inbox (docs/livechat.md, "The agent inbox"):
// the tenant's waiting and active live chats, a transcript, accept / answer / close, and
// the feed that keeps it all current. No framework, no build: fetch and the DOM.

const $ = (selector) => document.querySelector(selector);
const settings = $("#settings");
let connection = null;
let selected = null;
let feed = null;

// The settings live for this tab only: a token in localStorage would outlive the session.
for (const name of ["server", "tenant", "token"]) settings.elements[name].value = sessionStorage.getItem(`console.${name}`) ?? "";

settings.addEventListener("submit", (event) => {
  event.preventDefault();
  const values = Object.fromEntries(["server", "tenant", "token"].map((name) => [name, settings.elements[name].value.trim()]));
  for (const [name, value] of Object.entries(values)) sessionStorage.setItem(`console.${name}`, value);
  connection = { ...values, server: values.server.replace(/\/+$/, "") };
  void connect();
});

/** One call to the inbox; its JSON, or an Error with the service's message. */
async function inbox(method, path, body) {
  const response = await fetch(`${connection.server}/api/v1/livechat${path}`, {
    method,
    headers: {
      authorization: `Bearer ${connection.token}`,
      "x-tenant-id": connection.tenant,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error?.message ?? `HTTP ${response.status}`);
  return answer;
}

function say(text) {
  $("#state").textContent = text;
}

async function connect() {
  feed?.abort();
  try {
    await refreshQueue();
    say("Connected.");
    void follow();
  } catch (error) {
    say(`Cannot connect: ${error.message}`);
  }
}

/** The feed: every handover, message and change of mode of the tenant, from every instance. */
async function follow() {
  feed = new AbortController();
  const signal = feed.signal;
  while (!signal.aborted) {
    try {
      const response = await fetch(`${connection.server}/api/v1/livechat/feed`, {
        headers: { authorization: `Bearer ${connection.token}`, "x-tenant-id": connection.tenant },
        signal,
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += value;
        // Server-sent events: blank-line separated frames; only `data:` lines matter here.
        let end = buffer.indexOf("\n\n");
        while (end >= 0) {
          const data = buffer
            .slice(0, end)
            .split("\n")
            .filter((line) => line.startsWith("data: "))
            .map((line) => line.slice(6))
            .join("\n");
          buffer = buffer.slice(end + 2);
          if (data) await onEvent(JSON.parse(data));
          end = buffer.indexOf("\n\n");
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    say("Reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

async function onEvent(event) {
  if (event.type === "ready") return say("Connected, live.");
  await refreshQueue();
  const about = event.conversation_id ?? event.conversation?.conversation_id;
  if (about === selected) await show(selected);
}

async function refreshQueue() {
  const { conversations } = await inbox("GET", "/conversations?mode=all");
  const queue = $("#queue");
  queue.replaceChildren(
    ...conversations.map((conversation) => {
      const item = document.createElement("li");
      item.dataset.testid = "queue-item";
      item.dataset.conversation = conversation.conversation_id;
      item.setAttribute("aria-current", String(conversation.conversation_id === selected));
      const title = document.createElement("button");
      title.type = "button";
      title.textContent = conversation.conversation_id.slice(0, 8);
      title.addEventListener("click", () => void show(conversation.conversation_id));
      const mode = document.createElement("span");
      mode.className = "mode";
      mode.textContent = conversation.mode === "livechat_waiting" ? `waiting since ${new Date(conversation.mode_since).toLocaleTimeString()}` : "active";
      item.append(title, mode);
      if (conversation.mode === "livechat_waiting") {
        const accept = document.createElement("button");
        accept.type = "button";
        accept.textContent = "Accept";
        accept.dataset.testid = "accept";
        accept.addEventListener(
          "click",
          () => void act(() => inbox("POST", `/conversations/${conversation.conversation_id}/accept`), conversation.conversation_id),
        );
        item.append(accept);
      }
      return item;
    }),
  );
}

/** Shows one conversation's transcript and what the agent can do with it. */
async function show(conversationId) {
  selected = conversationId;
  const { conversation, messages } = await inbox("GET", `/conversations/${conversationId}`);
  $("#chat-mode").textContent = conversation.mode.replace("livechat_", "");
  $("#transcript").replaceChildren(
    ...messages.map((message) => {
      const item = document.createElement("li");
      const human = message.origin === "livechat" && message.sender !== "user";
      item.dataset.side = human ? "human" : message.role === "user" ? "user" : "bot";
      item.dataset.testid = "transcript-message";
      const who = document.createElement("small");
      who.textContent = human ? message.sender : message.role === "user" ? "user" : "bot";
      item.append(who, message.content);
      return item;
    }),
  );
  $("#reply").hidden = !(conversation.mode === "livechat_active" || conversation.mode === "livechat_waiting");
  for (const item of document.querySelectorAll("#queue li")) item.setAttribute("aria-current", String(item.dataset.conversation === conversationId));
}

async function act(action, conversationId) {
  try {
    await action();
    await refreshQueue();
    await show(conversationId);
  } catch (error) {
    say(error.message);
  }
}

$("#reply").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = event.target.elements.content;
  const content = input.value.trim();
  if (!content || !selected) return;
  input.value = "";
  void act(() => inbox("POST", `/conversations/${selected}/messages`, { content }), selected);
});

$("#close-chat").addEventListener("click", () => {
  if (selected) void act(() => inbox("POST", `/conversations/${selected}/close`), selected);
});
