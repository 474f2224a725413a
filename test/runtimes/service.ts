import {
  adminApi,
  type ChannelService,
  type ConnectionInfo,
  type ChannelServiceOptions,
  createChannelService,
  type Logger,
  liveChatInbox,
  type Storage,
} from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import type { KyselyStorage } from "@channelkit/kysely";

/*
 * The service a runtime's test server runs, as the contract suite's `serviceTarget` makes it
 * on Node (the demo flows, the admin routes, the inbox), plus a control route that only the
 * test servers mount: the suite provisions tenants and channels, and reads stored runs back,
 * through it (see remote.ts). Runtime-neutral: Bun, Deno and the Worker import it.
 */

/** A fixed test master key: signing secrets are sealed as in production. */
export const SECRET_KEY = "4f".repeat(32);
/** The HS256 secret of the admin tokens the suite signs. */
export const ADMIN_JWT_SECRET = "contract-suite-admin-jwt-secret-0123456789";
/** Where the control route answers; requests to it carry {@link CONTROL_HEADER}. */
export const CONTROL_PATH = "/__channelkit_test/control";
/** The header holding the control token the test gave the server. */
export const CONTROL_HEADER = "x-channelkit-test-control";

/** The options the suite starts a target with, as the test sends them to the server (JSON). */
export type TargetOptions = Pick<ChannelServiceOptions, "maxBodyBytes" | "rateLimits" | "trustProxy">;

/** A control call: a method of `service.admin` or of the storage, with its arguments. */
export interface ControlCall {
  target: "admin" | "storage" | "expireApiKeys";
  method: string;
  args: unknown[];
}

/** The suite provokes failures on purpose; the answers, not the log, are what it checks. */
const quiet: Logger = { warn() {}, error() {} };

/** A test server's fetch handler: the service, and the control route behind its token. */
export interface TestApp {
  service: ChannelService;
  fetch(request: Request, connection?: ConnectionInfo): Promise<Response>;
}

/**
 * The service on `storage` with the suite's settings and `options`, and the control route
 * answering only requests that carry `controlToken`. `expireApiKeys` marks a channel's keys
 * expired (the admin API cannot).
 */
export async function testApp(
  storage: Storage,
  options: TargetOptions,
  controlToken: string,
  expireApiKeys: (channelId: string) => Promise<void>,
  logger: Logger = quiet,
): Promise<TestApp> {
  const service = await createChannelService({
    storage,
    flows: demoFlows,
    secretKey: SECRET_KEY,
    logger,
    livechat: liveChatInbox({ secret: ADMIN_JWT_SECRET }),
    plugins: [adminApi({ secret: ADMIN_JWT_SECRET })],
    ...options,
  });
  async function control(request: Request): Promise<Response> {
    if (request.method !== "POST" || request.headers.get(CONTROL_HEADER) !== controlToken) return new Response("forbidden", { status: 403 });
    const call = (await request.json()) as ControlCall;
    try {
      let value: unknown;
      if (call.target === "expireApiKeys") value = await expireApiKeys(call.args[0] as string);
      else {
        const on = (call.target === "admin" ? service.admin : storage) as unknown as Record<string, (...args: unknown[]) => unknown>;
        if (typeof on[call.method] !== "function") throw new Error(`no method ${call.target}.${call.method}`);
        value = await on[call.method]?.(...call.args);
      }
      return Response.json({ ok: true, value: value ?? null });
    } catch (error) {
      const { name, message, code } = error as { name?: string; message?: string; code?: unknown };
      return Response.json({ ok: false, error: { name, message, code } });
    }
  }
  return {
    service,
    fetch(request, connection) {
      if (new URL(request.url).pathname === CONTROL_PATH) return control(request);
      return service.handler(request, connection);
    },
  };
}

/** What a Kysely storage's `expireApiKeys` runs: every key of the channel expired a minute ago. */
export function kyselyKeyExpiry(storage: KyselyStorage): (channelId: string) => Promise<void> {
  return async (channelId) => {
    const past = new Date(Date.now() - 60_000).toISOString();
    await storage.db.updateTable("api_keys").set({ expires_at: past }).where("channel_id", "=", channelId).execute();
  };
}
