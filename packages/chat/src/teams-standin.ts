import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";

/** Bot Framework's issuer, as its OpenID metadata names it. */
const BOT_FRAMEWORK_ISSUER = "https://api.botframework.com";

/** A token the bot bought from the sign-in stand-in. */
export interface TokenRequest {
  tenant: string;
  clientId: string;
  clientSecret: string;
  scope: string;
}

/** A call the bot made to the Bot Connector at its serviceUrl. */
export interface ConnectorCall {
  method: string;
  path: string;
  authorization: string | undefined;
  body: Record<string, unknown>;
}

/** How a test's token departs from the Bot Connector's (a forgery, or another bot's). */
export interface TokenOptions {
  audience?: string;
  serviceUrl?: string;
  expiresInS?: number;
  /** Signed with a key the metadata does not publish. */
  unpublishedKey?: boolean;
  /** Signed with a published key not endorsed for Teams. */
  unendorsedKey?: boolean;
}

/** A bot message as the user reads it: its text (a card's text blocks), and a card's buttons. */
export interface Shown {
  conversationId: string;
  text: string;
  buttons: { title: string; data: unknown }[];
}

/** What a message shows: its text, or its Adaptive Card's text blocks and Action.Submit buttons. */
function shown(conversationId: string, body: Record<string, unknown>): Shown {
  const texts: string[] = [];
  const buttons: Shown["buttons"] = [];
  const walk = (node: unknown): void => {
    if (node === null || typeof node !== "object") return;
    const element = node as Record<string, unknown>;
    if (element.type === "TextBlock") texts.push(String(element.text));
    if (element.type === "Action.Submit") buttons.push({ title: String(element.title), data: element.data });
    for (const value of Object.values(element)) walk(value);
  };
  walk(body.attachments);
  return { conversationId, text: typeof body.text === "string" && body.text !== "" ? body.text : texts.join("\n"), buttons };
}

type Key = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];

/**
 * Microsoft as a Teams bot sees it, on 127.0.0.1: Bot Framework's OpenID metadata and keys
 * (which sign the Bot Connector's deliveries: `sign()`), Entra ID's token endpoint (the bot
 * buys its tokens with its app id and password), and the Bot Connector at `serviceUrl`, where
 * the bot posts and edits its replies. Records every token bought and every connector call;
 * `textsIn(conversationId)` is what the user reads there now.
 */
export class TeamsStandIn {
  readonly tokenRequests: TokenRequest[] = [];
  readonly calls: ConnectorCall[] = [];
  readonly #issued = new Set<string>();
  readonly #messages = new Map<string, Shown>();
  readonly #waiting = new Set<() => void>();
  readonly #credentials: { appId: string; appPassword: string };
  #keys: { kid: string; key: Key; jwk: JWK }[] = [];
  #server: Server | undefined;
  #next = 1;
  url = "";

  constructor(credentials: { appId: string; appPassword: string }) {
    this.#credentials = credentials;
  }

  /** Where the Bot Connector is, as an activity names it (with its trailing slash, as Teams sends it). */
  get serviceUrl(): string {
    return `${this.url}/amer/`;
  }

  get openIdMetadataUrl(): string {
    return `${this.url}/botframework/v1/.well-known/openidconfiguration`;
  }

  get loginUrl(): string {
    return `${this.url}/login`;
  }

  async start(): Promise<void> {
    for (const [kid, endorsements] of [
      ["teams-key", ["msteams", "skype"]],
      ["webchat-key", ["webchat"]],
      ["unpublished-key", ["msteams"]],
    ] as const) {
      const { privateKey, publicKey } = await generateKeyPair("RS256");
      this.#keys.push({ kid, key: privateKey, jwk: { ...(await exportJWK(publicKey)), kid, kty: "RSA", use: "sig", endorsements: [...endorsements] } as JWK });
    }
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        void this.#answer(request, Buffer.concat(chunks).toString(), response).finally(() => {
          for (const wake of [...this.#waiting]) wake();
        });
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async #answer(request: IncomingMessage, text: string, response: ServerResponse): Promise<void> {
    const path = request.url ?? "";
    const json = (status: number, body: unknown) => response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (path === "/botframework/v1/.well-known/openidconfiguration") {
      return void json(200, {
        issuer: BOT_FRAMEWORK_ISSUER,
        jwks_uri: `${this.url}/botframework/v1/.well-known/keys`,
        id_token_signing_alg_values_supported: ["RS256"],
      });
    }
    if (path === "/botframework/v1/.well-known/keys") {
      return void json(200, { keys: this.#keys.filter((key) => key.kid !== "unpublished-key").map((key) => key.jwk) });
    }
    const login = /^\/login\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(path);
    if (login && request.method === "POST") return void json(...(await this.#token(decodeURIComponent(login[1] as string), new URLSearchParams(text))));
    if (path.startsWith("/amer/v3/conversations/")) {
      const body = (text === "" ? {} : JSON.parse(text)) as Record<string, unknown>;
      this.calls.push({
        method: request.method ?? "",
        path: decodeURIComponent(path.slice("/amer".length)),
        authorization: request.headers.authorization,
        body,
      });
      if (!this.#issued.has((request.headers.authorization ?? "").replace(/^Bearer /, ""))) return void json(401, { error: { code: "Unauthorized" } });
      return void json(200, this.#connector(request.method ?? "", decodeURIComponent(path.slice("/amer".length)), body));
    }
    json(404, { error: "not found" });
  }

  async #token(tenant: string, form: URLSearchParams): Promise<[number, unknown]> {
    const request = {
      tenant,
      clientId: form.get("client_id") ?? "",
      clientSecret: form.get("client_secret") ?? "",
      scope: form.get("scope") ?? "",
    };
    this.tokenRequests.push(request);
    if (
      form.get("grant_type") !== "client_credentials" ||
      request.clientId !== this.#credentials.appId ||
      request.clientSecret !== this.#credentials.appPassword
    ) {
      return [401, { error: "invalid_client", error_description: "AADSTS7000215: Invalid client secret provided." }];
    }
    // An Entra access token is a JWT: the Teams SDK reads its claims.
    const token = await new SignJWT({ appid: request.clientId, tid: tenant })
      .setProtectedHeader({ alg: "RS256", kid: "entra" })
      .setAudience(request.scope.replace(/\/\.default$/, ""))
      .setIssuer(`${this.url}/login/${tenant}/v2.0`)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign((this.#keys[0] as { key: Key }).key);
    this.#issued.add(token);
    return [200, { token_type: "Bearer", expires_in: 3599, ext_expires_in: 3599, access_token: token }];
  }

  #connector(method: string, path: string, body: Record<string, unknown>): unknown {
    const [, conversationId = "", resource = "", id] = /^\/v3\/conversations\/([^/]+)\/(\w+)(?:\/([^/?]+))?/.exec(path) ?? [];
    if (method === "GET" && resource === "members") {
      return {
        id,
        name: "Megan Bowen",
        aadObjectId: "00000000-0000-0000-0000-0000000000a1",
        email: "megan@contoso.example",
        userPrincipalName: "megan@contoso.example",
      };
    }
    if (resource !== "activities") return {};
    // A streamed message's chunks and its final message carry its id: the user reads the last.
    const existing = id ?? (typeof body.id === "string" ? body.id : undefined);
    const activityId = existing ?? `1:${this.#next++}`;
    if (body.type === "message" || existing !== undefined) this.#messages.set(activityId, shown(conversationId, body));
    return { id: activityId };
  }

  /** The bot's messages in a conversation as the user reads them now. */
  textsIn(conversationId: string): string[] {
    return this.messagesIn(conversationId).map((message) => message.text);
  }

  /** The bot's messages in a conversation, with their ids and buttons, as the user reads them now. */
  messagesIn(conversationId: string): (Shown & { id: string })[] {
    return [...this.#messages].filter(([, message]) => message.conversationId === conversationId).map(([id, message]) => ({ id, ...message }));
  }

  /** The Bot Connector's token for an activity to this bot, as it sends it in Authorization. */
  sign(activity: { serviceUrl: string }, options: TokenOptions = {}): Promise<string> {
    const kid = options.unpublishedKey ? "unpublished-key" : options.unendorsedKey ? "webchat-key" : "teams-key";
    const key = this.#keys.find((candidate) => candidate.kid === kid) as { key: Key };
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ serviceurl: options.serviceUrl ?? activity.serviceUrl })
      .setProtectedHeader({ alg: "RS256", kid, typ: "JWT", x5t: kid })
      .setIssuer(BOT_FRAMEWORK_ISSUER)
      .setAudience(options.audience ?? this.#credentials.appId)
      .setNotBefore(now - 10)
      .setExpirationTime(now + (options.expiresInS ?? 3600))
      .setJti(randomUUID())
      .sign(key.key);
  }

  /** Resolves once `done()` holds after a request; fails after `ms`, naming what it waited for. */
  waitFor(done: () => boolean, what: string, ms = 15_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const wake = () => {
        if (!done()) return;
        this.#waiting.delete(wake);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiting.delete(wake);
        reject(
          new Error(
            `Teams stand-in: still waiting for ${what} after ${ms} ms; connector calls: ${JSON.stringify(this.calls.map((call) => [call.method, call.path, call.body.type, call.body.text]))}`,
          ),
        );
      }, ms);
      this.#waiting.add(wake);
      wake();
    });
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}
