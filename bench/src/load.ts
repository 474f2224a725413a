/** The load generators: autocannon for request/response, a small client for SSE streams. */
import { Agent, request } from "node:http";
import autocannon from "autocannon";

/** What one measurement reports; latencies in milliseconds. */
export interface Measurement {
  /** Completed requests (or streams) per second. */
  rps: number;
  p50: number;
  p99: number;
  /** Streams only: time to the first `data:` frame. */
  ttfeP50?: number;
  ttfeP99?: number;
  /**
   * CPU time of the server process per completed request (user + system, µs): what a request
   * costs the server whatever else the machine was doing, so steadier than req/s on shared cores.
   */
  cpuUs?: number;
  /** Responses whose status was not the expected one, plus socket errors and timeouts. */
  unexpected: number;
  total: number;
}

/** One request autocannon sends; several are sent in turn on each connection. */
export interface RequestSpec {
  method: "GET" | "POST";
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface LoadOptions {
  baseUrl: string;
  connections: number;
  durationS: number;
  expectStatus: number;
  /** Other statuses counted as expected (e.g. 429 once a rate limit is reached). */
  alsoAccept?: number[];
  /**
   * Deal the requests in turn across all connections (one shared counter), rather than each
   * connection cycling through them from the first: concurrent requests then go to different
   * conversations when each request names its own.
   */
  spread?: boolean;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

export function median(values: number[]): number {
  const finite = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1 ? (finite[mid] as number) : ((finite[mid - 1] as number) + (finite[mid] as number)) / 2;
}

const toAutocannon = (spec: RequestSpec) => ({
  method: spec.method,
  path: spec.path,
  headers: spec.headers,
  ...(spec.body === undefined ? {} : { body: spec.body }),
});

/** Request/response load with autocannon, cycling through `requests` on every connection (or dealing them, `spread`). */
export async function requestLoad(options: LoadOptions, requests: RequestSpec[]): Promise<Measurement> {
  let dealt = 0;
  const result = await autocannon({
    url: options.baseUrl,
    connections: options.connections,
    duration: options.durationS,
    requests:
      options.spread && requests.length > 1
        ? [
            {
              ...toAutocannon(requests[0] as RequestSpec),
              setupRequest: (request) => ({ ...request, ...toAutocannon(requests[dealt++ % requests.length] as RequestSpec) }),
            },
          ]
        : requests.map(toAutocannon),
  });
  const statusCounts = (result as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {};
  let expected = 0;
  for (const [status, { count }] of Object.entries(statusCounts))
    if (Number(status) === options.expectStatus || options.alsoAccept?.includes(Number(status))) expected += count;
  const total = result.requests.total;
  return {
    rps: total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    unexpected: total - expected + result.errors + result.timeouts,
    total,
  };
}

/**
 * Closed-loop SSE load: `connections` clients each post a streamed execute, read it to its
 * end, and start the next, for `durationS`. Records the time to the first `data:` frame
 * (autocannon cannot) and to the end of the stream; a stream counts as expected only when it
 * ended with the `finish` event. Several specs are dealt in turn across the clients.
 */
export async function streamLoad(options: LoadOptions, specs: RequestSpec[]): Promise<Measurement> {
  let dealt = 0;
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  const ttfe: number[] = [];
  const ends: number[] = [];
  let unexpected = 0;
  const started = performance.now();
  const deadline = started + options.durationS * 1000;

  const one = () =>
    new Promise<void>((resolve) => {
      const spec = specs[dealt++ % specs.length] as RequestSpec;
      const url = new URL(spec.path, options.baseUrl);
      const t0 = performance.now();
      let first = -1;
      let tail = "";
      const req = request(url, { method: spec.method, headers: spec.headers, agent }, (res) => {
        const ok = res.statusCode === options.expectStatus;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          if (first < 0 && chunk.includes("data:")) first = performance.now() - t0;
          tail = (tail + chunk).slice(-200);
        });
        res.on("end", () => {
          if (ok && first >= 0 && tail.includes('"type":"finish"')) {
            ttfe.push(first);
            ends.push(performance.now() - t0);
          } else {
            unexpected++;
          }
          resolve();
        });
        res.on("error", () => {
          unexpected++;
          resolve();
        });
      });
      req.on("error", () => {
        unexpected++;
        resolve();
      });
      req.end(spec.body);
    });

  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      while (performance.now() < deadline) await one();
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  ttfe.sort((a, b) => a - b);
  ends.sort((a, b) => a - b);
  return {
    rps: ends.length / elapsed,
    p50: percentile(ends, 50),
    p99: percentile(ends, 99),
    ttfeP50: percentile(ttfe, 50),
    ttfeP99: percentile(ttfe, 99),
    unexpected,
    total: ends.length + unexpected,
  };
}

/** Streams held open on purpose, to measure what an open stream costs the server. */
export interface OpenStreams {
  /** How many reached their first event. */
  opened: number;
  close(): void;
}

/** Opens `count` streams, each on its own connection, and resolves once each sent its first event. */
export async function openStreams(baseUrl: string, spec: RequestSpec, count: number, timeoutMs = 15_000): Promise<OpenStreams> {
  const url = new URL(spec.path, baseUrl);
  const requests: ReturnType<typeof request>[] = [];
  let opened = 0;
  await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, timeoutMs);
          const req = request(url, { method: spec.method, headers: spec.headers, agent: false }, (res) => {
            let seen = false;
            res.on("data", (chunk: Buffer) => {
              if (!seen && chunk.includes("data:")) {
                seen = true;
                opened++;
                clearTimeout(timer);
                resolve();
              }
            });
            res.on("error", () => undefined);
          });
          req.on("error", () => resolve());
          requests.push(req);
          req.end(spec.body);
        }),
    ),
  );
  return {
    opened,
    close() {
      for (const req of requests) req.destroy();
    },
  };
}
