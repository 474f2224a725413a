import { SignJWT } from "jose";
import { CliError } from "./errors.js";

/**
 * An HS256 admin token signed with `CHANNELKIT_ADMIN_JWT_SECRET`, granting `tenantIds` (and
 * the organization `org`), whose subject names the command and the first tenant.
 */
export function signAdminToken(env: NodeJS.ProcessEnv, tenantIds: string[], org: string | undefined, expires: string): Promise<string> {
  const secret = env.CHANNELKIT_ADMIN_JWT_SECRET;
  if (!secret) {
    throw new CliError(
      "environment_error",
      "CHANNELKIT_ADMIN_JWT_SECRET is not set: admin tokens are signed with it. Set it to the server's value (a new one: openssl rand -hex 32)",
    );
  }
  return new SignJWT({ tenant_ids: tenantIds, ...(org ? { organization_id: org } : {}) })
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(`channelkit-cli:${tenantIds[0]}`)
    .setIssuedAt()
    .setExpirationTime(expires)
    .sign(new TextEncoder().encode(secret));
}
