import { describe, expect, it } from "vitest";
import { conversationStorageKey, readConversation, writeConversation } from "./storage.js";

/** A `Storage` on a Map, as a page's localStorage behaves. */
function mapStorage(): Storage {
  const items = new Map<string, string>();
  return {
    get length() {
      return items.size;
    },
    clear: () => items.clear(),
    getItem: (name) => items.get(name) ?? null,
    key: (index) => [...items.keys()][index] ?? null,
    removeItem: (name) => void items.delete(name),
    setItem: (name, value) => void items.set(name, String(value)),
  };
}

/** Storage that refuses everything, as in a sandboxed frame or with storage blocked. */
const refusing: Storage = {
  length: 0,
  clear() {},
  key: () => null,
  getItem() {
    throw new DOMException("denied", "SecurityError");
  },
  removeItem() {
    throw new DOMException("denied", "SecurityError");
  },
  setItem() {
    throw new DOMException("quota", "QuotaExceededError");
  },
};

const ID = "0b8e3c1e-6a52-4a8e-9f43-5d2f0c7e9a11";

describe("conversation storage", () => {
  it("scopes the item by endpoint and key: another key or service never continues the conversation", () => {
    const a = conversationStorageKey("https://chat.example", "svc_pub_a");
    expect(conversationStorageKey("https://chat.example/", "svc_pub_a")).toBe(a);
    expect(conversationStorageKey("https://chat.example", "svc_pub_b")).not.toBe(a);
    expect(conversationStorageKey("https://staging.chat.example", "svc_pub_a")).not.toBe(a);

    const storage = mapStorage();
    writeConversation(storage, a, ID);
    expect(readConversation(storage, a)).toBe(ID);
    expect(readConversation(storage, conversationStorageKey("https://chat.example", "svc_pub_b"))).toBeNull();
  });

  it("forgets with null, and drops anything stored that is not a UUID", () => {
    const storage = mapStorage();
    const item = conversationStorageKey("https://chat.example", "svc_pub_a");
    writeConversation(storage, item, ID);
    writeConversation(storage, item, null);
    expect(readConversation(storage, item)).toBeNull();
    expect(storage.length).toBe(0);
    storage.setItem(item, "not-a-uuid");
    expect(readConversation(storage, item)).toBeNull();
  });

  it("works without storage: blocked or missing storage only loses the restore", () => {
    expect(readConversation(refusing, "x")).toBeNull();
    expect(() => writeConversation(refusing, "x", ID)).not.toThrow();
    expect(() => writeConversation(refusing, "x", null)).not.toThrow();
    expect(readConversation(null, "x")).toBeNull();
    expect(() => writeConversation(null, "x", ID)).not.toThrow();
  });
});
