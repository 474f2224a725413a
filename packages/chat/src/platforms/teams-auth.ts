import { createRemoteJWKSet, errors, type JWK, jwtVerify, type RemoteJWKSet } from "jose";

/** Bot Framework's OpenID metadata (public cloud): its issuer and the keys that sign the Bot Connector's tokens. */
export const BOT_FRAMEWORK_OPENID_METADATA = "https://login.botframework.com/v1/.well-known/openidconfiguration";

/** Microsoft Entra ID's sign-in host (public cloud), where a bot's app id and password buy its tokens. */
export const ENTRA_LOGIN_URL = "https://login.microsoftonline.com";

/** Microsoft lets the Bot Connector's clock and ours differ by up to five minutes. */
const CLOCK_TOLERANCE_S = 300;

/** The metadata names where the keys are; it is read again after a day, the keys as jose refreshes them. */
const METADATA_MAX_AGE_MS = 24 * 60 * 60 * 1000;

/** jose's errors that say the keys were not read (a timeout, an answer other than a key set), not that the token is bad. */
const UNREAD_KEYS = new Set(["ERR_JWKS_TIMEOUT", "ERR_JWKS_INVALID", "ERR_JOSE_GENERIC"]);

interface Issuer {
  issuer: string;
  keys: RemoteJWKSet;
  readAt: number;
}

/** One issuer per metadata URL, for the whole process: the keys are Microsoft's, the same for every bot. */
const issuers = new Map<string, Promise<Issuer>>();

const issuerOf = (metadataUrl: string) =>
  kept(
    issuers,
    metadataUrl,
    (issuer) => Date.now() - issuer.readAt < METADATA_MAX_AGE_MS,
    () => readIssuer(metadataUrl),
  );

async function readIssuer(metadataUrl: string): Promise<Issuer> {
  const response = await fetch(metadataUrl, { signal: AbortSignal.timeout(10_000) });
  if (!response.ok) throw new Error(`Bot Framework's OpenID metadata answered ${response.status}`);
  const metadata = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
  if (typeof metadata.issuer !== "string" || typeof metadata.jwks_uri !== "string")
    throw new Error("Bot Framework's OpenID metadata names no issuer or jwks_uri");
  return { issuer: metadata.issuer, keys: createRemoteJWKSet(new URL(metadata.jwks_uri)), readAt: Date.now() };
}

/**
 * The value kept under `key` while `fresh`, else made again, once for all its concurrent
 * callers; a making that fails is not kept, so the next call tries again.
 */
async function kept<T>(values: Map<string, Promise<T>>, key: string, fresh: (value: T) => boolean, make: () => Promise<T>): Promise<T> {
  const known = values.get(key);
  if (known !== undefined) {
    const value = await known.catch(() => undefined);
    if (value !== undefined && fresh(value)) return value;
    if (values.get(key) === known) values.delete(key);
  }
  let making = values.get(key);
  if (making === undefined) {
    making = make();
    values.set(key, making);
    const made = making;
    made.catch(() => {
      if (values.get(key) === made) values.delete(key);
    });
  }
  return making;
}

/** The activity's fields the token is checked against. */
interface ActivityHead {
  channelId?: unknown;
  serviceUrl?: unknown;
}

const sameUrl = (a: string, b: string) => a.replace(/\/+$/, "").toLowerCase() === b.replace(/\/+$/, "").toLowerCase();

/**
 * Checks a Bot Connector delivery as Microsoft documents it ("Authenticate requests from the
 * Bot Connector service"): a bearer JWT signed RS256 by a key of the OpenID metadata's
 * `jwks_uri`, that key endorsed for the activity's `channelId`, the metadata's issuer, the
 * bot's app id as audience (or the `api://` forms the Teams SDK accepts), within five minutes
 * of its lifetime, and its `serviceurl` claim the activity's `serviceUrl`, where the reply
 * goes. Resolves false for a delivery that is not; rejects when the metadata or its keys
 * cannot be read.
 */
export async function verifyBotConnectorRequest(request: Request, body: string, appId: string, metadataUrl: string): Promise<boolean> {
  const authorization = request.headers.get("authorization") ?? "";
  if (!authorization.startsWith("Bearer ")) return false;
  let activity: ActivityHead;
  try {
    activity = JSON.parse(body) as ActivityHead;
  } catch {
    return false;
  }
  if (typeof activity.channelId !== "string" || typeof activity.serviceUrl !== "string") return false;
  const { issuer, keys } = await issuerOf(metadataUrl);
  let verified: Awaited<ReturnType<typeof jwtVerify>>;
  try {
    verified = await jwtVerify(authorization.slice("Bearer ".length), keys, {
      issuer,
      audience: [appId, `api://botid-${appId}`, `api://${appId}`],
      algorithms: ["RS256"],
      clockTolerance: CLOCK_TOLERANCE_S,
      requiredClaims: ["exp"],
    });
  } catch (error) {
    // Keys that could not be read are no verdict on the token: the caller hears of it.
    if (!(error instanceof errors.JOSEError) || UNREAD_KEYS.has(error.code)) throw error;
    return false;
  }
  const key = keys.jwks()?.keys.find((candidate) => candidate.kid === verified.protectedHeader.kid) as (JWK & { endorsements?: unknown }) | undefined;
  const endorsements = Array.isArray(key?.endorsements) ? key.endorsements : [];
  if (!endorsements.includes(activity.channelId)) return false;
  const serviceUrl = verified.payload.serviceurl;
  return typeof serviceUrl === "string" && sameUrl(serviceUrl, activity.serviceUrl);
}

/** What buys a bot's tokens: its app id and password, at its tenant (or Bot Framework's, for a multi-tenant bot). */
export interface BotCredentials {
  appId: string;
  appPassword: string;
  tenantId: string | undefined;
  loginUrl: string;
}

/** A token is bought again this long before it expires. */
const EARLY_MS = 5 * 60 * 1000;

/**
 * The Teams SDK's token factory (the adapter's `token` option): Entra ID's client-credentials
 * grant, as Microsoft documents it for Bot Framework (`POST {login}/{tenant}/oauth2/v2.0/token`),
 * each token kept until five minutes before it expires. The SDK asks for one before every call.
 *
 * The Bot Connector's token comes from the bot's tenant (`botframework.com` for a multi-tenant
 * bot), whatever tenant the SDK names: it would name a process-wide `TENANT_ID`.
 */
export function botTokens(credentials: BotCredentials): (scope: string | string[], tenantId?: string) => Promise<string> {
  const tokens = new Map<string, Promise<{ token: string; until: number }>>();
  return async (scope, tenantId) => {
    const scopes = Array.isArray(scope) ? scope.join(" ") : scope;
    const forBotConnector = /botframework/i.test(scopes);
    const tenant = credentials.tenantId ?? (forBotConnector ? "botframework.com" : (tenantId ?? "common"));
    const bought = await kept(
      tokens,
      `${tenant} ${scopes}`,
      (token) => token.until > Date.now(),
      () => buyToken(credentials, tenant, scopes),
    );
    return bought.token;
  };
}

async function buyToken(credentials: BotCredentials, tenant: string, scope: string): Promise<{ token: string; until: number }> {
  const url = `${credentials.loginUrl.replace(/\/+$/, "")}/${encodeURIComponent(tenant)}/oauth2/v2.0/token`;
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", client_id: credentials.appId, client_secret: credentials.appPassword, scope }),
    signal: AbortSignal.timeout(10_000),
  });
  const answer = (await response.json().catch(() => ({}))) as { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown };
  if (!response.ok || typeof answer.access_token !== "string") {
    // Entra's error names what is wrong (AADSTS7000215: invalid client secret) and never echoes the secret.
    throw new Error(
      `Microsoft Entra ID refused the bot's token (${response.status}): ${String(answer.error_description ?? answer.error ?? "no access_token")}`,
    );
  }
  const lifetime = typeof answer.expires_in === "number" ? answer.expires_in * 1000 : Number(answer.expires_in) * 1000 || 0;
  return { token: answer.access_token, until: Date.now() + lifetime - EARLY_MS };
}
