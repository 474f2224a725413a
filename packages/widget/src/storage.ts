const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The `localStorage` item holding the conversation of one widget: scoped by endpoint and
 * publishable key, so two widgets on a page (or one page pointed at staging then prod) never
 * continue each other's conversations.
 */
export function conversationStorageKey(endpoint: string, key: string): string {
  return `channelkit:conversation:${endpoint.replace(/\/+$/, "")}|${key}`;
}

/** The page's `localStorage`, or null where reading it throws (blocked storage, sandboxed frames). */
export function pageStorage(): Storage | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null;
  }
}

/**
 * The remembered conversation id, or null; anything but a UUID is dropped rather than sent
 * (the service would refuse it with a 422).
 */
export function readConversation(storage: Storage | null, item: string): string | null {
  try {
    const value = storage?.getItem(item) ?? null;
    return value !== null && UUID.test(value) ? value : null;
  } catch {
    return null;
  }
}

/** Remembers (an id) or forgets (null) the conversation; storage that refuses (quota, privacy mode) only loses the restore. */
export function writeConversation(storage: Storage | null, item: string, conversationId: string | null): void {
  try {
    if (conversationId === null) storage?.removeItem(item);
    else storage?.setItem(item, conversationId);
  } catch {
    // See above: the conversation goes on, it just won't survive a reload.
  }
}
