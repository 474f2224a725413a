import { sha256Hex } from "../auth/encoding.js";
import type { Logger, ReleaseHold, ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { IncomingRequest, Reply, ReplyStream } from "../http/reply.js";
import type { TextPart } from "../runs/driver.js";
import type { RunOutcome } from "../runs/outcome.js";
import type { StartedRun } from "../runs/start.js";
import { isoTimestamp } from "../runs/timestamp.js";
import { closingFrame, dataRunFrame, UI_STREAM_HEADERS } from "../runs/ui-stream.js";
import { memoryIdempotencyStore } from "../storage/memory-idempotency.js";
import type { IdempotencyStore, IdempotentResponse } from "../storage/types.js";

/** The request header that makes a request idempotent (Stripe's name). */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
/** The answer header that marks a replay of a stored answer (Stripe's name). */
export const REPLAYED_HEADER = "idempotent-replayed";
/** 1 to 255 visible ASCII characters: a UUID, a ULID, base64, an order number. No space, so a header sent twice (`a, b`) is refused. */
const KEY_FORMAT = /^[\x21-\x7e]{1,255}$/;
/** How long a key holds its request's body and answer, in ms: a day, as Stripe keeps them. */
export const KEY_LIFETIME_MS = 24 * 60 * 60 * 1000;
/** How often an instance deletes the expired keys, in ms (on a request with a key: none without). */
const PRUNE_EVERY_MS = 10 * 60_000;
/** What `Retry-After` says to a request whose key is in use, in seconds. */
const IN_USE_RETRY_AFTER = "1";

/**
 * The route that takes an `Idempotency-Key` (`execute`, `newMessage`, a plugin's own name):
 * part of what is hashed, so a key never answers one route with another's answer.
 */
export type IdempotentOperation = string;

/**
 * The request's `Idempotency-Key`, or null when it has none: reading a header is all a
 * request without one costs. `400 invalid_idempotency_key` when it is not 1 to 255 visible
 * ASCII characters.
 */
export function idempotencyKeyOf(request: Pick<IncomingRequest, "headers">): string | null {
  const key = request.headers.get(IDEMPOTENCY_KEY_HEADER);
  if (key === null) return null;
  if (!KEY_FORMAT.test(key)) throw new ServiceError("invalid_idempotency_key");
  return key;
}

/**
 * What a route tells of the run that answers a request whose key it claimed, so that its
 * answer is stored for the request's retries (see {@link answerOnce}).
 */
export interface KeptAnswer {
  /**
   * A run answered as a stream: its steps, watched. The events it streams are kept, and once
   * it ends its answer (the stream's frames, `data-run` to the last event) is stored before
   * the last event is given. `followsClient`: whether the client leaving stops the run.
   */
  stream(run: StartedRun, followsClient: boolean): StartedRun;
  /** The client's stream of a run that follows its client: its cancel (the client gone) is seen. */
  watch(stream: ReplyStream): ReplyStream;
  /** A run answered whole: its answer is stored, then given. */
  whole(outcome: RunOutcome, reply: Reply, followsClient: boolean): Promise<Reply>;
}

/** What {@link answerOnce} scopes a key to. */
export interface IdempotentScope {
  channelId: string;
  operation: IdempotentOperation;
  /** The request's key ({@link idempotencyKeyOf}); null runs `answer` as is. */
  key: string | null;
  /** The request's body, parsed: its JSON text, with the operation, is hashed; the body is never kept. */
  body: unknown;
}

/**
 * Answers a request once per key (docs/api.md, "Idempotent requests"). Without a key,
 * `answer(null)` and nothing else: no statement. With one, the key is claimed in the store
 * (scoped to the channel, for a day): a key claimed by another body is `422
 * idempotency_key_reused`; one whose request still runs, on any instance, `409
 * idempotency_key_in_use` with `Retry-After`; one answered is answered again, the stored
 * answer replayed with `Idempotent-Replayed: true`, and nothing runs. Otherwise `answer`
 * runs with the {@link KeptAnswer} that stores its answer; a failure before there is one
 * frees the key.
 */
export async function answerOnce(
  ctx: ServiceContext,
  request: Pick<IncomingRequest, "signal">,
  scope: IdempotentScope,
  answer: (kept: KeptAnswer | null) => Promise<Reply>,
): Promise<Reply> {
  if (scope.key === null) return answer(null);
  const keys = keysOf(ctx);
  const hash = await sha256Hex(`${scope.operation}\n${JSON.stringify(scope.body)}`);
  const token = crypto.randomUUID();
  const nowMs = Date.now();
  const existing = await keys.store.claim({
    channelId: scope.channelId,
    key: scope.key,
    requestHash: hash,
    token,
    now: isoTimestamp(nowMs),
    expiresAt: isoTimestamp(nowMs + KEY_LIFETIME_MS),
    lockedUntil: isoTimestamp(nowMs + keys.leaseMs),
  });
  keys.prune(nowMs);
  if (existing) {
    if (existing.requestHash !== hash) throw new ServiceError("idempotency_key_reused");
    if (existing.state === "running" || existing.response === null) {
      throw new ServiceError("idempotency_key_in_use", undefined, { headers: { "retry-after": IN_USE_RETRY_AFTER } });
    }
    return replay(existing.response);
  }
  const claim = new Claim(ctx, keys, request, scope.channelId, scope.key, token, nowMs);
  let reply: Reply;
  try {
    reply = await answer(claim);
  } catch (error) {
    await claim.release();
    throw error;
  }
  // A route that answered without a run (none does today) leaves nothing to keep.
  if (!claim.attached) await claim.release();
  return reply;
}

/** A stored answer, answered again. */
function replay(response: IdempotentResponse): Reply {
  const type = response.kind === "stream" ? UI_STREAM_HEADERS : { "content-type": "application/json; charset=utf-8" };
  return { status: response.status, headers: { ...type, [REPLAYED_HEADER]: "true" }, body: response.body };
}

/** One SSE frame of a text part, as the stream sends it. */
function textFrame(part: TextPart): string {
  return `data: ${JSON.stringify(part)}\n\n`;
}

/** A key claimed by a request in flight here: renewed until its answer is stored, or it is freed. */
class Claim implements KeptAnswer {
  readonly #ctx: ServiceContext;
  readonly #keys: Keys;
  readonly #request: Pick<IncomingRequest, "signal">;
  readonly channelId: string;
  readonly key: string;
  readonly token: string;
  readonly sinceMs: number;
  /**
   * The claim counts as a run of the service until its answer is stored: `close()` waits for
   * it as it does for a run, so the storage is not closed under the write that keeps it.
   */
  readonly #release: ReleaseHold;
  #settled = false;
  #clientGone = false;
  /** Whether a run's answer was given to the claim. */
  attached = false;

  constructor(ctx: ServiceContext, keys: Keys, request: Pick<IncomingRequest, "signal">, channelId: string, key: string, token: string, sinceMs: number) {
    this.#ctx = ctx;
    this.#keys = keys;
    this.#request = request;
    this.channelId = channelId;
    this.key = key;
    this.token = token;
    this.sinceMs = sinceMs;
    this.#release = ctx.runs.hold();
    keys.hold(this);
  }

  stream(run: StartedRun, followsClient: boolean): StartedRun {
    this.attached = true;
    const frames = [dataRunFrame(run.runId, run.conversationId)];
    const steps = run.steps;
    const claim = this;
    return {
      ...run,
      steps: {
        async next() {
          let step: IteratorResult<TextPart, RunOutcome>;
          try {
            step = await steps.next();
          } catch (error) {
            await claim.release();
            throw error;
          }
          if (!step.done) {
            frames.push(textFrame(step.value));
            return step;
          }
          frames.push(closingFrame(step.value));
          await claim.#settle(step.value, followsClient, { status: 200, kind: "stream", body: frames.join("") });
          return step;
        },
      },
    };
  }

  watch(stream: ReplyStream): ReplyStream {
    return {
      pull: () => stream.pull(),
      cancel: () => {
        this.#clientGone = true;
        stream.cancel();
      },
    };
  }

  async whole(outcome: RunOutcome, reply: Reply, followsClient: boolean): Promise<Reply> {
    this.attached = true;
    await this.#settle(outcome, followsClient, { status: reply.status, kind: "json", body: String(reply.body) });
    return reply;
  }

  /** Frees the key: its request has no answer to keep. */
  async release(): Promise<void> {
    if (this.#settled) return;
    this.#settled = true;
    try {
      await this.#keys.store.release(this.channelId, this.key, this.token);
    } catch (error) {
      this.#ctx.logger.error(`channelkit: the Idempotency-Key ${JSON.stringify(this.key)} could not be freed; it is once its lease lapses`, error);
    } finally {
      this.#end();
    }
  }

  /**
   * Stores the run's answer, unless the run was stopped before its end by its client leaving
   * or the service shutting down: its client did not get that answer, so a retry runs again.
   */
  async #settle(outcome: RunOutcome, followsClient: boolean, response: IdempotentResponse): Promise<void> {
    const stoppedShort = outcome.status === "cancelled" && (this.#ctx.runs.closed || (followsClient && (this.#clientGone || this.#request.signal.aborted)));
    if (stoppedShort) return this.release();
    if (this.#settled) return;
    this.#settled = true;
    try {
      const stored = await this.#keys.store.complete(this.channelId, this.key, this.token, response);
      if (!stored)
        this.#ctx.logger.warn(
          `channelkit: the Idempotency-Key ${JSON.stringify(this.key)} was taken over while its run ran (its lease lapsed); its answer is not kept`,
        );
    } catch (error) {
      this.#ctx.logger.error(
        `channelkit: the answer of the Idempotency-Key ${JSON.stringify(this.key)} could not be stored; a retry runs again once its lease lapses`,
        error,
      );
    } finally {
      this.#end();
    }
  }

  #end(): void {
    this.#keys.drop(this);
    this.#release();
  }
}

/**
 * The keys of one service: its store (the storage's, else this process's memory), the
 * claims in flight here, whose leases one timer renews every third of the lease (made with
 * the first claim, ended with the last), and when this instance last deleted expired keys.
 */
class Keys {
  readonly store: IdempotencyStore;
  readonly leaseMs: number;
  readonly #logger: Logger;
  readonly #claims = new Set<Claim>();
  #renewals: ReturnType<typeof setInterval> | undefined;
  #prunedAtMs = Number.NEGATIVE_INFINITY;

  constructor(store: IdempotencyStore, leaseMs: number, logger: Logger) {
    this.store = store;
    this.leaseMs = leaseMs;
    this.#logger = logger;
  }

  hold(claim: Claim): void {
    this.#claims.add(claim);
    if (this.#renewals !== undefined) return;
    this.#renewals = setInterval(() => void this.#renew(), this.leaseMs / 3);
    // Renewals must not keep a Node process alive on their own.
    (this.#renewals as { unref?: () => void }).unref?.();
  }

  drop(claim: Claim): void {
    this.#claims.delete(claim);
    if (this.#claims.size > 0 || this.#renewals === undefined) return;
    clearInterval(this.#renewals);
    this.#renewals = undefined;
  }

  /** Deletes the expired keys, at most every {@link PRUNE_EVERY_MS} per instance, without waiting for it. */
  prune(nowMs: number): void {
    if (nowMs - this.#prunedAtMs < PRUNE_EVERY_MS) return;
    this.#prunedAtMs = nowMs;
    this.store.prune(isoTimestamp(nowMs)).catch((error: unknown) => this.#logger.warn("channelkit: expired idempotency keys could not be deleted", error));
  }

  async #renew(): Promise<void> {
    const nowMs = Date.now();
    const until = isoTimestamp(nowMs + this.leaseMs);
    await Promise.all(
      [...this.#claims]
        .filter((claim) => nowMs - claim.sinceMs >= this.leaseMs / 3)
        .map(async (claim) => {
          try {
            if (!(await this.store.renew(claim.channelId, claim.key, claim.token, until))) {
              this.#logger.warn(`channelkit: the Idempotency-Key ${JSON.stringify(claim.key)} was taken over while its run ran (its lease lapsed)`);
            }
          } catch (error) {
            this.#logger.warn(`channelkit: the lease of the Idempotency-Key ${JSON.stringify(claim.key)} could not be renewed`, error);
          }
        }),
    );
  }
}

const services = new WeakMap<ServiceContext, Keys>();

/** The keys of `ctx`'s service, made on its first request with a key. */
function keysOf(ctx: ServiceContext): Keys {
  let keys = services.get(ctx);
  if (keys === undefined) {
    let store = ctx.storage.idempotency;
    if (store === undefined) {
      ctx.logger.warn(
        "channelkit: this storage keeps no idempotency keys (storage.idempotency): each instance keeps them in its memory, so a key sent to two instances may run twice",
      );
      store = memoryIdempotencyStore(() => undefined);
    }
    keys = new Keys(store, ctx.runs.leaseMs, ctx.logger);
    services.set(ctx, keys);
  }
  return keys;
}
