import type { Reply } from "../http/reply.js";
import type { ChannelPlugin } from "../plugin/plugin.js";
import { defineRoute } from "../plugin/route.js";
import type { Storage } from "../storage/types.js";
import { z } from "zod";

/** Path of the liveness probe (under the service's `basePath`). */
export const HEALTHZ_PATH = "/healthz";
/** Path of the readiness probe (under the service's `basePath`). */
export const READYZ_PATH = "/readyz";

/** Longest a readiness probe waits for the storage, in ms: a database that does not answer in time is not ready. */
export const READY_STORAGE_TIMEOUT_MS = 2000;

/** What `GET /readyz` found: each check, and whether all passed. */
export interface Readiness {
  ready: boolean;
  /** `ok`, or `unreachable` when the storage failed or did not answer within {@link READY_STORAGE_TIMEOUT_MS}. */
  storage: "ok" | "unreachable";
  /** `current`, `behind` (migrations not applied: their names in `pending`), or `unknown` when the storage could not be read. */
  migrations: "current" | "behind" | "unknown";
  /** Migrations this version knows that the database lacks. */
  pending: string[];
  /** Whether the service is closing (`service.close()` began): it finishes what it has and takes nothing new. */
  draining: boolean;
}

/** What readiness reads of the service. */
export interface ReadinessSources {
  storage: Storage;
  /** The plugins the service mounts: their tables are part of the schema. */
  plugins: () => readonly ChannelPlugin[];
  /** Whether `service.close()` began. */
  closing: () => boolean;
}

/**
 * Whether the service can take requests: its storage answers (read through `schemaStatus`,
 * so one query also says whether every migration, the plugins' included, is applied) and it
 * is not closing. A storage without `schemaStatus` (memory) is in the process: it answers.
 */
export async function readiness(sources: ReadinessSources): Promise<Readiness> {
  const draining = sources.closing();
  const { storage } = sources;
  if (!storage.schemaStatus) return { ready: !draining, storage: "ok", migrations: "current", pending: [], draining };
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const status = await Promise.race([
      storage.schemaStatus({ plugins: [...sources.plugins()] }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("timeout")), READY_STORAGE_TIMEOUT_MS);
      }),
    ]);
    const behind = status.pending.length > 0;
    return { ready: !draining && !behind, storage: "ok", migrations: behind ? "behind" : "current", pending: status.pending, draining };
  } catch {
    return { ready: false, storage: "unreachable", migrations: "unknown", pending: [], draining };
  } finally {
    clearTimeout(timer);
  }
}

/** `GET /healthz`'s answer. */
const healthBody = z.object({ status: z.literal("ok") });

/** `GET /readyz`'s answer, ready (200) or not (503). */
const readinessBody = z.object({
  status: z.enum(["ready", "not_ready"]),
  storage: z.enum(["ok", "unreachable"]),
  migrations: z.enum(["current", "behind", "unknown"]),
  pending: z.array(z.string()).describe("The migrations the database lacks."),
  draining: z.boolean().describe("Whether the service is closing."),
});

const NO_STORE = { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" };

/**
 * `GET /healthz` and `GET /readyz`, for load balancers and orchestrators: off the rate limits,
 * no key. `/healthz` answers 200 while the process answers; `/readyz` answers 200 when
 * {@link readiness} passes, else 503, each with what it found. Turned off with
 * `createChannelService({ health: false })`; a path in `taken` (a route of the host's own
 * plugins) is left to that route.
 */
export function healthPlugin(sources: ReadinessSources, taken: ReadonlySet<string> = new Set()): ChannelPlugin {
  return {
    id: "channelkit-health",
    routes: probeRoutes(sources).filter((route) => !taken.has(route.path)),
  };
}

function probeRoutes(sources: ReadinessSources) {
  return [
    defineRoute({
      method: "GET",
      path: HEALTHZ_PATH,
      auth: "none",
      rateLimited: false,
      doc: {
        operationId: "getHealth",
        summary: "Liveness probe",
        description:
          '200 `{ "status": "ok" }` while the process answers requests; nothing else is checked (a liveness probe that reads the database would restart every instance when the database is down). Turned off with `createChannelService({ health: false })`.',
        tag: "service",
        responses: { 200: { description: "The process answers.", json: healthBody, headers: ["Cache-Control-No-Store"] } },
        errors: ["runtime_error"],
      },
      handle(): Reply {
        return { status: 200, headers: { ...NO_STORE }, body: '{"status":"ok"}' };
      },
    }),
    defineRoute({
      method: "GET",
      path: READYZ_PATH,
      auth: "none",
      rateLimited: false,
      doc: {
        operationId: "getReadiness",
        summary: "Readiness probe",
        description:
          '200 when the service can take requests: its storage answers within 2 s, every migration (its plugins\' included) is applied, and it is not closing; else 503. The body says what was found: `{ "status": "ready" | "not_ready", "storage": "ok" | "unreachable", "migrations": "current" | "behind" | "unknown", "pending": [...], "draining": false }`. Behind `@channelkit/node`, a server that drains answers every new request 503 `service_draining`, this one included.',
        tag: "service",
        responses: {
          200: { description: "Ready.", json: readinessBody, headers: ["Cache-Control-No-Store"] },
          503: {
            description: "Not ready: the storage does not answer, migrations are pending, or the service is closing.",
            json: readinessBody,
            headers: ["Cache-Control-No-Store"],
          },
        },
        errors: ["runtime_error"],
      },
      async handle(): Promise<Reply> {
        const found = await readiness(sources);
        const { ready, ...checks } = found;
        return { status: ready ? 200 : 503, headers: { ...NO_STORE }, body: JSON.stringify({ status: ready ? "ready" : "not_ready", ...checks }) };
      },
    }),
  ];
}
