/**
 * What the client's tests share: a real service (the demo flows, SQLite, the admin routes and
 * the live-chat inbox) behind `serve()` on 127.0.0.1, channels provisioned with
 * `service.admin`, admin tokens signed with jose, and a `fetch` that records what it sent and
 * what came back. Not part of the package.
 */
import type { CreateChannelInput } from "@channelkit/core";
import { serve } from "@channelkit/node";
import { type RunningTarget, serviceTarget, sqliteTestStore } from "@channelkit/testkit";
import { SignJWT } from "jose";

/** A channel made for one test, in a tenant of its own unless given one. */
export interface TestChannel {
  id: string;
  tenantId: string;
  key: string;
  signingSecret: string | null;
  clientId: string | undefined;
}

/** A running service and what the tests do with it. */
export interface TestServer {
  url: string;
  target: RunningTarget;
  channel(spec: Omit<CreateChannelInput, "tenantId"> & { tenantId?: string }): Promise<TestChannel>;
  /** An HS256 admin token granting `tenantId`, valid for an hour. */
  adminToken(tenantId: string, subject?: string): Promise<string>;
  close(): Promise<void>;
}

/** Starts the service the contract suite runs on node:http and SQLite. */
export async function startServer(): Promise<TestServer> {
  const target = await serviceTarget({ name: "client", store: sqliteTestStore, listen: (service) => serve(service, { port: 0 }) }).start({});
  return {
    url: target.url,
    target,
    async channel({ tenantId, ...spec }) {
      const tenant = tenantId ?? (await target.admin.createTenant({ name: "client tests" })).tenant.id;
      const created = await target.admin.createChannel({ ...spec, tenantId: tenant });
      return {
        id: created.channel.id,
        tenantId: tenant,
        key: created.api_key,
        signingSecret: created.signing_secret,
        clientId: (created.channel as { client_id?: string }).client_id,
      };
    },
    adminToken: (tenantId, subject = "client-tests") =>
      new SignJWT({ tenant_ids: [tenantId] })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject(subject)
        .setIssuedAt()
        .setExpirationTime("1h")
        .sign(new TextEncoder().encode(target.adminJwtSecret)),
    close: () => target.close(),
  };
}

/** One exchange seen by {@link recordingFetch}. */
export interface Exchange {
  method: string;
  path: string;
  /** The status, or null when `fetch` failed. */
  status: number | null;
  retryAfter: string | null;
  /** The `Idempotency-Key` it sent, if any. */
  idempotencyKey: string | null;
  /** Its answer's `Idempotent-Replayed`. */
  replayed: string | null;
  at: number;
}

/** The global `fetch`, recording each exchange: how a test counts the client's attempts. */
export function recordingFetch(): { fetch: typeof fetch; exchanges: Exchange[] } {
  const exchanges: Exchange[] = [];
  const recording = async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const exchange: Exchange = {
      method: init?.method ?? "GET",
      path: url.pathname,
      status: null,
      retryAfter: null,
      idempotencyKey: new Headers(init?.headers).get("idempotency-key"),
      replayed: null,
      at: Date.now(),
    };
    exchanges.push(exchange);
    const response = await fetch(input, init);
    exchange.status = response.status;
    exchange.retryAfter = response.headers.get("retry-after");
    exchange.replayed = response.headers.get("idempotent-replayed");
    return response;
  };
  return { fetch: recording as typeof fetch, exchanges };
}

/** Polls `check` until it returns a value other than undefined, or fails after `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined>, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
