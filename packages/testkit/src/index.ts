import { describe } from "vitest";
import { abortTests } from "./abort.js";
import { accessTests } from "./access.js";
import { adminTests } from "./admin.js";
import { authTests } from "./auth.js";
import { bodyLimitTests, bodyTests } from "./body.js";
import { checkOrderTests } from "./check-order.js";
import { conversationTests } from "./conversations.js";
import { corsTests } from "./cors.js";
import { executeJsonTests } from "./execute-json.js";
import { flowTests } from "./flows.js";
import { StorageGate } from "./gate.js";
import { Harness } from "./harness.js";
import { leavingClientTests } from "./leaving.js";
import { historyTests } from "./history.js";
import { idempotencyTests } from "./idempotency.js";
import { liveChatTests } from "./livechat.js";
import { openApiTests } from "./openapi.js";
import { rateLimitTests, serviceRateLimitTests } from "./ratelimit.js";
import { resumableTests } from "./resumable.js";
import { signatureTests } from "./signature.js";
import { streamTests } from "./stream.js";
import { turnTests } from "./turns.js";
import { webhookTests } from "./webhook.js";
import { widgetTests } from "./widget.js";
import type { ContractTarget } from "./types.js";

export type { ContractTarget, ContractTargetOptions, RunningTarget } from "./types.js";

/** The failed-authentication and admin limits of the third target, small so that its tests send little. */
const SMALL_RATE_LIMIT = 5;

/** The body limit of the second target, small so that limit tests send little. */
const SMALL_BODY_LIMIT = 2048;

/**
 * Declares the channelkit HTTP contract suite (vitest `describe`/`it`) against `target`.
 * Call it at the top level of a test file. The suite talks to the target only over HTTP
 * with `fetch`, provisions tenants and channels with `admin`, and reads stored runs back
 * with `storage.findRun`, so any adapter on any storage can be checked with it.
 *
 * It starts the target twice: once with the defaults for most tests, and once with a small
 * `maxBodyBytes` for the configurable body limit.
 *
 * @example
 * defineContractSuite(serviceTarget({
 *   name: "node:http + SQLite",
 *   store: sqliteTestStore,
 *   listen: (service) => serve(service, { port: 0 }),
 * }));
 */
export function defineContractSuite(target: ContractTarget, options: ContractSuiteOptions = {}): void {
  const omitted = options.omit ?? {};
  for (const [group, reason] of Object.entries(omitted)) console.warn(`${target.name}: not run: ${group}: ${reason}`);
  describe(`channelkit contract: ${target.name}`, () => {
    const h = new Harness(target);
    for (const [group, tests] of CONTRACT_GROUPS) if (!(group in omitted)) tests(h);

    describe("with small service rate limits, behind a trusted proxy", () => {
      const tight = new Harness(target, {
        rateLimits: { failedAuth: { requests: SMALL_RATE_LIMIT, windowSeconds: 60 }, admin: { requests: SMALL_RATE_LIMIT, windowSeconds: 60 } },
        trustProxy: 1,
      });
      serviceRateLimitTests(tight, SMALL_RATE_LIMIT);
    });

    describe("with a small body limit", () => {
      const small = new Harness(target, { maxBodyBytes: SMALL_BODY_LIMIT });
      bodyLimitTests(small, SMALL_BODY_LIMIT);
    });

    if (!("leaving clients" in omitted)) {
      describe("held at a point of a request", () => {
        const gate = new StorageGate();
        const held = new Harness(target, { wrapStorage: (storage) => gate.wrap(storage) });
        leavingClientTests(held, gate);
      });
    }
  });
}

/** The contract suite's groups of cases, by name, in the order they run. */
const CONTRACT_GROUPS = [
  ["auth", authTests],
  ["access", accessTests],
  ["body", bodyTests],
  ["signature", signatureTests],
  ["check order", checkOrderTests],
  ["execute JSON", executeJsonTests],
  ["stream", streamTests],
  ["history", historyTests],
  ["conversations", conversationTests],
  ["flows", flowTests],
  ["cors", corsTests],
  ["client disconnect", abortTests],
  ["resumable streams", resumableTests],
  ["turns", turnTests],
  ["idempotent requests", idempotencyTests],
  ["admin", adminTests],
  ["webhook", webhookTests],
  ["widget", widgetTests],
  ["live chat", liveChatTests],
  ["openapi", openApiTests],
  ["rate limits", rateLimitTests],
] as const satisfies readonly (readonly [string, (h: Harness) => void])[];

/**
 * A group of the contract suite's cases (see {@link defineContractSuite}). `leaving clients`
 * holds the service at points of a request, through its storage (`wrapStorage`).
 */
export type ContractGroup = (typeof CONTRACT_GROUPS)[number][0] | "leaving clients";

/** How {@link defineContractSuite} runs. */
export interface ContractSuiteOptions {
  /**
   * Groups that cannot apply to this target, each with why (a runtime that ends a request's
   * work when its client leaves, say): they are not run, and the reason is printed.
   */
  omit?: Partial<Record<ContractGroup, string>>;
}

export { serviceTarget, listenOnFreePort, type ServiceTargetOptions, type TestStore, type ListeningServer } from "./target.js";
export { sqliteTestStore, postgresTestStore, memoryTestStore, type SharedTestDatabase, sqliteSharedDatabase, postgresSharedDatabase } from "./stores.js";
export { pluginStoreContract, storageContract, type StorageUnderTest } from "./storage-contract.js";
export { type FilledConversation, type FillOptions, fillConversation } from "./conversation-rows.js";
export { expectExactSignedBody, expectPrefixBoundary, pingPlugin, streamingProbe, UNUSUAL_SIGNED_BODY, type StreamingProbe } from "./adapter.js";

export {
  POSTGRES_URL_ENV,
  postgresTestUrl,
  createTestDatabase,
  describeWithPostgres,
  type TestDatabase,
} from "./postgres.js";
export { SseFrames } from "./frames.js";
export { StorageGate, type HeldCall } from "./gate.js";
export { OpenApiConformance, coreOpenApiDocument } from "./conformance.js";
export { corePlugins } from "./core-plugins.js";
