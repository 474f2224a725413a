import { afterEach, describe, expect, it, vi } from "vitest";
import { historyMessages, loadConfig, loadHistory, resumeChat, startChat } from "./api.js";
import { WidgetRequestError } from "./errors.js";

const connection = { endpoint: "https://chat.example", key: "svc_pub_abc" };
const signal = new AbortController().signal;

afterEach(() => {
  vi.unstubAllGlobals();
});

/** Replaces fetch with one answering `response`, and records the requests. */
function answer(response: Response | Error) {
  const requests: Request[] = [];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    requests.push(new Request(url, init));
    if (response instanceof Error) throw response;
    return response;
  });
  return requests;
}

describe("requests", () => {
  it("sends the key as a bearer token, never cookies, to the endpoint's routes", async () => {
    const requests = answer(Response.json({ locale: "fr_FR" }));
    expect(await loadConfig(connection, "fr_FR", signal)).toEqual({ locale: "fr_FR" });
    const [request] = requests as [Request];
    expect(request.url).toBe("https://chat.example/public/widget/config?locale=fr_FR");
    expect(request.headers.get("authorization")).toBe("Bearer svc_pub_abc");
    expect(request.credentials).toBe("omit");
  });

  it("posts { payload, conversation_id } as JSON", async () => {
    const requests = answer(new Response("data: {}\n\n", { headers: { "content-type": "text/event-stream" } }));
    const id = "0b8e3c1e-6a52-4a8e-9f43-5d2f0c7e9a11";
    await startChat(connection, { payload: "Hi", conversation_id: id }, signal);
    const [request] = requests as [Request];
    expect(request.method).toBe("POST");
    expect(request.url).toBe("https://chat.example/public/widget/chat");
    expect(request.headers.get("content-type")).toBe("application/json");
    expect(await request.json()).toEqual({ payload: "Hi", conversation_id: id });
  });

  it("turns an error envelope into its code, and no answer into network", async () => {
    answer(Response.json({ error: { code: "channel_archived", message: "gone" } }, { status: 410 }));
    await expect(startChat(connection, { payload: "Hi" }, signal)).rejects.toMatchObject({ status: 410, code: "channel_archived" });
    answer(new TypeError("Failed to fetch"));
    const failure = await loadConfig(connection, null, signal).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WidgetRequestError);
    expect(failure).toMatchObject({ status: 0, code: "network" });
  });

  it("lets an abort through as an abort, not as a network failure", async () => {
    const controller = new AbortController();
    controller.abort();
    answer(new DOMException("aborted", "AbortError"));
    await expect(loadConfig(connection, null, controller.signal)).rejects.toMatchObject({ name: "AbortError" });
  });

  it("reads the history: null for a conversation the service does not know (404 { detail })", async () => {
    answer(Response.json({ detail: "No conversation found" }, { status: 404 }));
    expect(await loadHistory(connection, "0b8e3c1e-6a52-4a8e-9f43-5d2f0c7e9a11", signal)).toBeNull();
    const requests = answer(
      Response.json({ messages: [{ role: "user", content: "Hi", turn_index: 4 }], mode: "livechat_active", livechat_status_message: "With Ann" }),
    );
    expect(await loadHistory(connection, "0b8e3c1e-6a52-4a8e-9f43-5d2f0c7e9a11", signal)).toEqual({
      messages: [{ role: "user", content: "Hi" }],
      lastTurn: 4,
      livechat: { mode: "livechat_active", statusMessage: "With Ann" },
    });
    expect(requests[0]?.url).toBe("https://chat.example/public/v1/api/conversations/0b8e3c1e-6a52-4a8e-9f43-5d2f0c7e9a11/messages?limit=50");
  });
});

describe("resumeChat", () => {
  const id = "0b8e3c1e-6a52-4a8e-9f43-5d2f0c7e9a11";

  it("gets the conversation's stream with the key: its body while a run is in flight, null on 204", async () => {
    const requests = answer(new Response('data: {"type":"data-run"}\n\n', { headers: { "content-type": "text/event-stream" } }));
    const body = await resumeChat(connection, id, signal);
    expect(await new Response(body).text()).toBe('data: {"type":"data-run"}\n\n');
    const [request] = requests as [Request];
    expect(request.method).toBe("GET");
    expect(request.url).toBe(`https://chat.example/public/widget/chat/${id}/stream`);
    expect(request.headers.get("authorization")).toBe("Bearer svc_pub_abc");
    expect(request.credentials).toBe("omit");
    answer(new Response(null, { status: 204 }));
    expect(await resumeChat(connection, id, signal)).toBeNull();
  });

  it("turns a refusal into its code, and no answer into network", async () => {
    answer(Response.json({ error: { code: "origin_not_allowed" } }, { status: 403 }));
    await expect(resumeChat(connection, id, signal)).rejects.toMatchObject({ status: 403, code: "origin_not_allowed" });
    answer(new TypeError("Failed to fetch"));
    await expect(resumeChat(connection, id, signal)).rejects.toMatchObject({ status: 0, code: "network" });
  });
});

describe("historyMessages", () => {
  it("keeps the user and assistant texts, in order", () => {
    const messages = [
      { role: "system", content: "You are helpful" },
      { role: "user", content: "Hi", origin: "user", turn_index: 1 },
      { role: "tool", content: "{}" },
      { role: "assistant", content: "Echo: Hi" },
      { role: "assistant", content: "" },
      null,
      { role: "user", content: 42 },
    ];
    expect(historyMessages(messages)).toEqual([
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Echo: Hi" },
    ]);
    expect(historyMessages(undefined)).toEqual([]);
    // The human side of a live chat is kept with its sender; the user's messages to it are the user's.
    expect(
      historyMessages([
        { role: "assistant", content: "Hi, I am Ann", origin: "livechat", sender: "agent" },
        { role: "system", content: "Transferred", origin: "livechat", sender: "system" },
        { role: "user", content: "Thanks", origin: "livechat", sender: "user" },
      ]),
    ).toEqual([
      { role: "assistant", content: "Hi, I am Ann", sender: "agent" },
      { role: "assistant", content: "Transferred", sender: "system" },
      { role: "user", content: "Thanks" },
    ]);
  });
});
