import { type JWTPayload, SignJWT } from "jose";
import { expect } from "vitest";
import type { Harness } from "./harness.js";
import { fetch } from "./conformance.js";

/** Path of a channel's admin route: its view and settings, or one of its operations. */
export function channelAdminPath(channelId: string, operation?: "rotate-key" | "rotate-signing-secret"): string {
  return `/api/v1/channels/${encodeURIComponent(channelId)}${operation ? `/${operation}` : ""}`;
}

/** Path of the audit trail route. */
export const AUDIT_PATH = "/api/v1/audit";

/** How to sign an admin token: its claims, and when it becomes valid and expires (Unix seconds or a jose duration). */
export interface TokenSpec {
  claims?: JWTPayload;
  subject?: string;
  expires?: number | string;
  notBefore?: number | string;
  /** Sign with this secret instead of the target's. */
  secret?: string;
}

/** An HS256 admin token signed with jose, by default with the target's secret, valid for an hour. */
export function adminToken(h: Harness, { claims = {}, subject = "contract-admin", expires = "1h", notBefore, secret }: TokenSpec = {}): Promise<string> {
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setSubject(subject).setIssuedAt().setExpirationTime(expires);
  if (notBefore !== undefined) jwt.setNotBefore(notBefore);
  return jwt.sign(new TextEncoder().encode(secret ?? h.target.adminJwtSecret));
}

/** A token granting `tenantId` through `tenant_ids`. */
export function tokenFor(h: Harness, tenantId: string, spec: TokenSpec = {}): Promise<string> {
  return adminToken(h, { ...spec, claims: { tenant_ids: [tenantId], ...spec.claims } });
}

/** What an admin request sends; `undefined` token or tenant sends no such header. */
export interface AdminRequest {
  token?: string;
  /** Raw `Authorization` value, instead of `Bearer <token>`. */
  authorization?: string;
  tenant?: string;
  /** A plain object is sent as JSON; a string exactly as given. */
  body?: unknown;
  contentType?: string | null;
}

/** One request to an admin route. */
export function adminFetch(h: Harness, method: string, path: string, request: AdminRequest = {}): Promise<Response> {
  const headers = new Headers();
  if (request.authorization !== undefined) headers.set("authorization", request.authorization);
  else if (request.token !== undefined) headers.set("authorization", `Bearer ${request.token}`);
  if (request.tenant !== undefined) headers.set("x-tenant-id", request.tenant);
  let body: string | undefined;
  if (request.body !== undefined) {
    body = typeof request.body === "string" ? request.body : JSON.stringify(request.body);
    const type = request.contentType === undefined ? "application/json" : request.contentType;
    if (type !== null) headers.set("content-type", type);
  }
  return fetch(h.url(path), { method, headers, body });
}

/** An admin request answered 200: its JSON body. */
export async function adminOk<T = any>(h: Harness, method: string, path: string, request: AdminRequest): Promise<T> {
  const response = await adminFetch(h, method, path, request);
  const text = await response.text();
  expect(response.status, `${method} ${path}: ${text}`).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
  return JSON.parse(text) as T;
}
