import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminApi } from "../admin/routes/plugin.js";
import type { Logger } from "../context.js";
import { demoFlows } from "../flows/demo.js";
import { type AdminAuthOptions, createChannelService, memoryStorage } from "../index.js";

const SECRET = "admin-token-test-secret-0123456789abcdef";

interface Logged {
  logger: Logger;
  lines: string[];
}

function capture(): Logged {
  const lines: string[] = [];
  return { lines, logger: { warn: (m, ...d) => lines.push([m, ...d.map(String)].join(" ")), error: (m, ...d) => lines.push([m, ...d.map(String)].join(" ")) } };
}

/** A service with the admin routes on `options`, one tenant and one channel of it. */
async function serviceWith(options: AdminAuthOptions, production = false) {
  const { logger, lines } = capture();
  const service = await createChannelService({
    storage: memoryStorage(),
    flows: demoFlows,
    logger,
    secretKey: "ab".repeat(32),
    production,
    plugins: [adminApi(options)],
  });
  const { tenant } = await service.admin.createTenant({ name: "T" });
  const { channel } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
  const view = (token: string | null, tenantId: string | null = tenant.id) => {
    const headers = new Headers();
    if (token !== null) headers.set("authorization", `Bearer ${token}`);
    if (tenantId !== null) headers.set("x-tenant-id", tenantId);
    return service.handler(new Request(`http://channelkit.test/api/v1/channels/${channel.id}`, { headers }));
  };
  return { service, tenantId: tenant.id, channelId: channel.id, view, lines };
}

async function codeOf(response: Response): Promise<[number, string | undefined]> {
  const body = (await response.json()) as { error?: { code: string } };
  return [response.status, body.error?.code];
}

function hs256(claims: Record<string, unknown>) {
  return new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setSubject("tester");
}

const sign = (jwt: SignJWT, secret = SECRET) => jwt.sign(new TextEncoder().encode(secret));

describe("admin options, checked at start-up", () => {
  it("a secret shorter than 32 characters fails the start in production and is a warning elsewhere", async () => {
    await expect(serviceWith({ secret: "short" }, true)).rejects.toThrow(/shorter than 32 characters/);
    const { view, tenantId, lines } = await serviceWith({ secret: "short" });
    expect(lines.join("\n")).toMatch(/WARNING: the admin JWT secret is shorter than 32 characters/);
    expect((await view(await sign(hs256({ tenant_ids: [tenantId] }).setExpirationTime("1h"), "short"))).status).toBe(200);
  });

  it("an empty secret, a JWKS URL that is not http(s) and unknown options fail the start", async () => {
    await expect(serviceWith({ secret: "" })).rejects.toThrow(/must not be empty/);
    await expect(serviceWith({ jwksUrl: "ftp://keys.example/jwks.json" })).rejects.toThrow(/http\(s\) URL/);
    await expect(serviceWith({ secrett: SECRET } as AdminAuthOptions)).rejects.toThrow(/invalid admin options/);
  });

  it("the development mode is refused in production, and allowed otherwise", async () => {
    await expect(serviceWith({ development: true }, true)).rejects.toThrow(/refused in production/);
    const { view } = await serviceWith({ development: true });
    expect((await view(null)).status).toBe(200);
  });

  it("without a secret, a JWKS URL or the development mode, it warns at start and refuses every token", async () => {
    const { view, tenantId, lines } = await serviceWith({});
    expect(lines.join("\n")).toMatch(/every admin request is refused/);
    expect(await codeOf(await view(await sign(hs256({ tenant_ids: [tenantId] }))))).toEqual([401, "unauthorized"]);
    expect(await codeOf(await view(null))).toEqual([401, "unauthorized"]);
  });
});

describe("the development mode", () => {
  it("accepts a request without a token for its X-Tenant-ID, which stays mandatory, and records the actor `development`", async () => {
    const { service, view, tenantId, channelId } = await serviceWith({ development: true });
    expect(await codeOf(await view(null, null))).toEqual([401, "missing_tenant"]);
    expect(await codeOf(await view(null, crypto.randomUUID()))).toEqual([404, "channel_not_found"]);
    const rotated = await service.handler(
      new Request(`http://channelkit.test/api/v1/channels/${channelId}/rotate-key`, { method: "POST", headers: { "x-tenant-id": tenantId } }),
    );
    expect(rotated.status).toBe(200);
    const { events } = await service.admin.audit({ tenantId, channelId });
    expect(events[0]).toMatchObject({ operation: "rotate_key", actor: "development", via: "http", outcome: "success" });
  });

  it("still verifies a token that is sent", async () => {
    const { view, tenantId } = await serviceWith({ development: true, secret: SECRET });
    expect(await codeOf(await view("garbage"))).toEqual([401, "unauthorized"]);
    expect((await view(await sign(hs256({ tenant_ids: [tenantId] }).setExpirationTime("1h")))).status).toBe(200);
    expect(await codeOf(await view(await sign(hs256({ tenant_ids: ["other"] }).setExpirationTime("1h"))))).toEqual([403, "forbidden"]);
  });
});

describe("HS256 tokens", () => {
  it("issuer and audience, when configured, must match", async () => {
    const { view, tenantId } = await serviceWith({ secret: SECRET, issuer: "https://idp.example", audience: ["channelkit", "console"] });
    const base = () => hs256({ tenant_ids: [tenantId] }).setExpirationTime("1h");
    expect((await view(await sign(base().setIssuer("https://idp.example").setAudience("console")))).status).toBe(200);
    const refused = [
      base().setAudience("console"),
      base().setIssuer("https://evil.example").setAudience("console"),
      base().setIssuer("https://idp.example").setAudience("other"),
    ];
    for (const jwt of refused) expect(await codeOf(await view(await sign(jwt)))).toEqual([401, "unauthorized"]);
  });

  it("exp and nbf hold with a few seconds of clock skew (default 5 s, configurable)", async () => {
    const { view, tenantId } = await serviceWith({ secret: SECRET });
    const now = Math.floor(Date.now() / 1000);
    const at = (exp: number, nbf?: number) => {
      const jwt = hs256({ tenant_ids: [tenantId] }).setExpirationTime(exp);
      return sign(nbf === undefined ? jwt : jwt.setNotBefore(nbf));
    };
    expect((await view(await at(now - 2))).status).toBe(200);
    expect((await view(await at(now + 60, now + 2))).status).toBe(200);
    expect(await codeOf(await view(await at(now - 30)))).toEqual([401, "unauthorized"]);
    expect(await codeOf(await view(await at(now + 60, now + 30)))).toEqual([401, "unauthorized"]);
    const lenient = await serviceWith({ secret: SECRET, clockToleranceSeconds: 60 });
    const token = await sign(hs256({ tenant_ids: [lenient.tenantId] }).setExpirationTime(now - 30));
    expect((await lenient.view(token)).status).toBe(200);
  });

  it("says why a token is refused, without echoing it", async () => {
    const { view, tenantId } = await serviceWith({ secret: SECRET });
    const expired = await sign(hs256({ tenant_ids: [tenantId] }).setExpirationTime(Math.floor(Date.now() / 1000) - 60));
    const body = (await (await view(expired)).json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/expired/);
    expect(JSON.stringify(body)).not.toContain(expired);
  });
});

/** A JWKS endpoint on 127.0.0.1 whose keys a test replaces, counting its fetches. */
class JwksServer {
  keys: JWK[] = [];
  fetches = 0;
  down = false;
  #server: Server | undefined;
  url = "";

  async start(): Promise<void> {
    this.#server = createServer((_request, response) => {
      this.fetches++;
      if (this.down) {
        response.writeHead(503).end();
        return;
      }
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: this.keys }));
    });
    await new Promise<void>((resolve) => this.#server?.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/.well-known/jwks.json`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#server?.close(() => resolve()));
  }
}

async function keyPair(alg: "RS256" | "ES256", kid: string) {
  const { privateKey, publicKey } = await generateKeyPair(alg);
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" };
  const token = (claims: Record<string, unknown>) =>
    new SignJWT(claims).setProtectedHeader({ alg, kid }).setSubject(`${kid}-holder`).setExpirationTime("1h").sign(privateKey);
  return { jwk, token, publicKey };
}

describe("tokens verified with a JWKS (RS256, ES256)", () => {
  const jwks = new JwksServer();
  beforeAll(() => jwks.start());
  afterAll(() => jwks.close());

  it("verifies RS256 and ES256 tokens, caches the key set, and refetches it on an unknown kid (a key rotation)", async () => {
    const rsa = await keyPair("RS256", "rsa-1");
    const ec = await keyPair("ES256", "ec-1");
    jwks.keys = [rsa.jwk, ec.jwk];
    jwks.fetches = 0;
    const { view, tenantId } = await serviceWith({ jwksUrl: jwks.url, jwksCooldownMs: 0 });
    expect((await view(await rsa.token({ tenant_ids: [tenantId] }))).status).toBe(200);
    expect((await view(await ec.token({ organization_id: tenantId }))).status).toBe(200);
    expect(jwks.fetches).toBe(1);

    // The identity provider rotates: rsa-2 replaces rsa-1.
    const next = await keyPair("RS256", "rsa-2");
    jwks.keys = [next.jwk, ec.jwk];
    expect((await view(await next.token({ tenant_ids: [tenantId] }))).status).toBe(200);
    expect(jwks.fetches).toBe(2);
    expect(await codeOf(await view(await rsa.token({ tenant_ids: [tenantId] })))).toEqual([401, "unauthorized"]);
    expect(await codeOf(await view(await next.token({ tenant_ids: ["someone-else"] })))).toEqual([403, "forbidden"]);
  });

  it("within the cooldown, an unknown kid does not refetch the key set", async () => {
    const first = await keyPair("ES256", "cool-1");
    jwks.keys = [first.jwk];
    jwks.fetches = 0;
    const { view, tenantId } = await serviceWith({ jwksUrl: jwks.url, jwksCooldownMs: 60_000 });
    expect((await view(await first.token({ tenant_ids: [tenantId] }))).status).toBe(200);
    const second = await keyPair("ES256", "cool-2");
    jwks.keys = [first.jwk, second.jwk];
    expect(await codeOf(await view(await second.token({ tenant_ids: [tenantId] })))).toEqual([401, "unauthorized"]);
    expect(jwks.fetches).toBe(1);
  });

  it("refuses HS256 on a JWKS-only service, even signed with the public key (no algorithm confusion)", async () => {
    const rsa = await keyPair("RS256", "confusion");
    jwks.keys = [rsa.jwk];
    const { view, tenantId } = await serviceWith({ jwksUrl: jwks.url, jwksCooldownMs: 0 });
    const publicJwk = JSON.stringify(rsa.jwk);
    const forged = await sign(hs256({ tenant_ids: [tenantId] }).setExpirationTime("1h"), publicJwk);
    expect(await codeOf(await view(forged))).toEqual([401, "unauthorized"]);
    // And an RS256 token on an HS256-only service.
    const hsOnly = await serviceWith({ secret: SECRET });
    expect(await codeOf(await hsOnly.view(await rsa.token({ tenant_ids: [hsOnly.tenantId] })))).toEqual([401, "unauthorized"]);
  });

  it("a secret and a JWKS together accept both kinds of token", async () => {
    const ec = await keyPair("ES256", "both");
    jwks.keys = [ec.jwk];
    const { view, tenantId } = await serviceWith({ secret: SECRET, jwksUrl: jwks.url });
    expect((await view(await ec.token({ tenant_ids: [tenantId] }))).status).toBe(200);
    expect((await view(await sign(hs256({ tenant_ids: [tenantId] }).setExpirationTime("1h")))).status).toBe(200);
  });

  it("a key set that cannot be fetched is 503 jwks_unavailable, logged; the caller is not blamed", async () => {
    const ec = await keyPair("ES256", "down");
    jwks.down = true;
    try {
      const { view, tenantId, lines } = await serviceWith({ jwksUrl: jwks.url });
      expect(await codeOf(await view(await ec.token({ tenant_ids: [tenantId] })))).toEqual([503, "jwks_unavailable"]);
      expect(lines.join("\n")).toMatch(/JWKS .* could not be fetched/);
    } finally {
      jwks.down = false;
    }
  });
});
