import { type Attributes, context, type Span, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { isReplyStream, type Reply, type ReplyChunk, type ReplyStream } from "../http/reply.js";
import type { ServiceTelemetry } from "./telemetry.js";

const SERVER = { kind: SpanKind.SERVER } as const;

/** One request as the access log has it, once it is answered (a stream: once it ended). */
export interface AccessLogEntry {
  /** ISO 8601 time the request arrived. */
  time: string;
  /** The request's id (`X-Request-Id`). */
  request_id: string;
  method: string;
  /** The URL's path, without its query. */
  path: string;
  /** The route's template under the `basePath` (`/public/v1/api/conversations/:session_id/messages`), null when none matched. */
  route: string | null;
  status: number;
  /** From the request's arrival to its answer's end, in ms. */
  duration_ms: number;
  /** The client's address as the rate limits read it (see `trustProxy`), when known. */
  client_address: string | null;
}

/** What the access log of a request is made of, besides what the answer tells. */
export interface AccessLogRequest {
  write: (entry: AccessLogEntry) => void;
  requestId: string;
  path: string;
  clientAddress: string | null;
}

/**
 * One request as telemetry sees it: a `SERVER` span named by its method and route template
 * (`POST /public/v1/api/execute`; never the path's ids, the query, a key or the body), and
 * `http.server.request.duration`, both ended when the answer is: for a stream, at its last
 * chunk or when its client leaves.
 */
export class RequestTelemetry {
  readonly #telemetry: ServiceTelemetry;
  readonly #span: Span;
  readonly #method: string;
  readonly #startedMs = performance.now();
  readonly #access: AccessLogRequest | null;
  #route: string | undefined;

  /** @param access the access log's, when the service keeps one. */
  constructor(telemetry: ServiceTelemetry, method: string, access: AccessLogRequest | null) {
    this.#telemetry = telemetry;
    this.#method = method;
    this.#access = access;
    this.#span = telemetry.tracer.startSpan(method, SERVER);
  }

  /** The route the request matched, as its template under the service's `basePath`. */
  matched(route: string): void {
    this.#route = route;
  }

  /** Calls `handle` with the request's span active, so that the runs it starts are its children. */
  within<T>(handle: () => T): T {
    if (!this.#span.isRecording()) return handle();
    return context.with(trace.setSpan(context.active(), this.#span), handle);
  }

  /** The answer: counted and its span ended now, or when its stream ends. */
  answered(reply: Reply): Reply {
    if (isReplyStream(reply.body)) {
      this.#telemetry.openStreams.add(1);
      reply.body = new ObservedStream(reply.body, () => {
        this.#telemetry.openStreams.add(-1);
        this.#end(reply.status);
      });
    } else {
      this.#end(reply.status);
    }
    return reply;
  }

  #end(status: number): void {
    const elapsedMs = performance.now() - this.#startedMs;
    if (this.#access) this.#log(this.#access, status, elapsedMs);
    const attributes: Attributes = { "http.request.method": this.#method, "http.response.status_code": status };
    if (this.#route !== undefined) attributes["http.route"] = this.#route;
    this.#telemetry.requestDuration.record(elapsedMs / 1000, attributes);
    const span = this.#span;
    if (!span.isRecording()) return;
    if (this.#route !== undefined) span.updateName(`${this.#method} ${this.#route}`);
    span.setAttributes(attributes);
    // A server span is an error for a 5xx only: a 4xx is the client's (OpenTelemetry's HTTP conventions).
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  #log(access: AccessLogRequest, status: number, elapsedMs: number): void {
    try {
      access.write({
        time: new Date(Date.now() - elapsedMs).toISOString(),
        request_id: access.requestId,
        method: this.#method,
        path: access.path,
        route: this.#route ?? null,
        status,
        duration_ms: Math.round(elapsedMs * 10) / 10,
        client_address: access.clientAddress,
      });
    } catch {
      // The access log is the host's: its failure is not the request's.
    }
  }
}

/** A stream that tells once when it ended, by its last chunk, a failure, or its client leaving. */
class ObservedStream implements ReplyStream {
  readonly #source: ReplyStream;
  #onEnd: (() => void) | null;

  constructor(source: ReplyStream, onEnd: () => void) {
    this.#source = source;
    this.#onEnd = onEnd;
  }

  pull(): ReplyChunk | null | Promise<ReplyChunk | null> {
    let chunk: ReplyChunk | null | Promise<ReplyChunk | null>;
    try {
      chunk = this.#source.pull();
    } catch (error) {
      this.#ended();
      throw error;
    }
    if (chunk === null) this.#ended();
    else if (chunk instanceof Promise) {
      return chunk.then(
        (next) => {
          if (next === null) this.#ended();
          return next;
        },
        (error: unknown) => {
          this.#ended();
          throw error;
        },
      );
    }
    return chunk;
  }

  cancel(): void {
    this.#ended();
    this.#source.cancel();
  }

  #ended(): void {
    const onEnd = this.#onEnd;
    this.#onEnd = null;
    onEnd?.();
  }
}
