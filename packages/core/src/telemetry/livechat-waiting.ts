import type { ObservableResult } from "@opentelemetry/api";
import type { Logger } from "../context.js";
import { DEFAULT_WAIT_TIMEOUT_MS } from "../livechat/modes.js";
import type { LiveChatProvider } from "../livechat/provider.js";
import { isoTimestamp } from "../runs/timestamp.js";
import type { Storage } from "../storage/types.js";
import { registeredMeter } from "./telemetry.js";

/**
 * `channelkit.livechat.waiting` ({conversation}): the conversations of every tenant that wait
 * for a live-chat agent, read from the store at each collection (`Storage.countLiveChatWaiting`),
 * so every instance on one database reports the same number, not its own share. Made only
 * when an SDK's meter provider is registered, a live chat is configured and the store counts;
 * otherwise nothing is made and nothing runs. A store that fails to answer is logged once in the
 * service's life (a collection every few seconds would flood the log otherwise) and the
 * collection goes on without the gauge's point.
 * Returns what stops it: the service's `close()` calls it before the store closes.
 */
export function observeLiveChatWaiting(storage: Storage, provider: LiveChatProvider | null, logger: Logger): () => void {
  const meter = registeredMeter();
  if (meter === null || provider === null || !storage.countLiveChatWaiting) return () => {};
  const gauge = meter.createObservableGauge("channelkit.livechat.waiting", {
    unit: "{conversation}",
    description: "Conversations handed over to a live chat and waiting for an agent, on every instance.",
  });
  let stopped = false;
  let warned = false;
  const observe = async (result: ObservableResult) => {
    if (stopped) return;
    try {
      const count = await storage.countLiveChatWaiting?.({ at: isoTimestamp(Date.now()), defaultWaitTimeoutMs: DEFAULT_WAIT_TIMEOUT_MS });
      if (stopped || count === undefined) return;
      result.observe(count);
    } catch (error) {
      if (stopped || warned) return;
      warned = true;
      logger.warn("channelkit: the live-chat waiting count could not be read from the store; channelkit.livechat.waiting has no point until it can", error);
    }
  };
  gauge.addCallback(observe);
  return () => {
    stopped = true;
    gauge.removeCallback(observe);
  };
}
