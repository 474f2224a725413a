/**
 * Every answer the contract suite receives, checked against the OpenAPI document of
 * `@channelkit/core`'s routes (`coreOpenApiDocument()`: `docs/openapi.json` but the widget's
 * script): the suite's requests go through {@link fetch} here rather than the global one,
 * and a route the document lacks, a status it does not list for the route, a missing or
 * malformed header, a body or a server-sent event that does not match its schema is a
 * violation, which fails the test that received it (see `Harness`).
 */
import { type OpenApiDocument, openApiDocument } from "@channelkit/core";
import { corePlugins } from "./core-plugins.js";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

/** What is left of a body in a message: enough to see what differs. */
const SHOWN = 600;

type Json = Record<string, any>;

/** A part of the document and where it is, a JSON pointer (`#/paths/...`), references followed. */
interface Located {
  value: Json;
  pointer: string;
}

const pointerSegment = (segment: string) => segment.replace(/~/g, "~0").replace(/\//g, "~1");
const shorten = (text: string) => (text.length > SHOWN ? `${text.slice(0, SHOWN)}… (${text.length} characters)` : text);
/** Statuses whose answer never has a body. */
const NO_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * The OpenAPI document of every route of `@channelkit/core` and of its plugins
 * ({@link corePlugins}). `docs/openapi.json` is this with the routes of
 * `@channelkit/widget`'s `widgetAsset()`.
 */
export function coreOpenApiDocument(): OpenApiDocument {
  return openApiDocument({ plugins: corePlugins() });
}

/**
 * Checks answers against an OpenAPI 3.1 document (by default {@link coreOpenApiDocument}): its paths (templates of `{name}`
 * segments), its operations, their responses' statuses, headers and media types, and the
 * JSON Schemas of their bodies (Ajv, draft 2020-12, with formats). An event stream
 * (`text/event-stream`) is checked event by event against the schema of one event, as the
 * client reads it.
 */
export class OpenApiConformance {
  readonly #document: OpenApiDocument;
  readonly #ajv: Ajv2020;
  readonly #validators = new Map<string, ValidateFunction>();
  readonly #templates: { path: string; segments: string[] }[];

  constructor(document: OpenApiDocument = coreOpenApiDocument()) {
    this.#document = document;
    this.#ajv = new Ajv2020({ strict: false, allErrors: true, discriminator: true });
    addFormats(this.#ajv);
    this.#ajv.addSchema(document as unknown as Json, "openapi.json");
    this.#templates = Object.keys(document.paths).map((path) => ({ path, segments: segmentsOf(path) }));
  }

  /**
   * Checks an answer to `method path` (the path as the service sees it, without its prefix)
   * and answers the response to hand to the caller: the same one, or, for an event stream,
   * one whose body is checked as the caller reads it. Each violation found is passed to
   * `report`, at once or as the stream goes.
   */
  async inspect(method: string, path: string, response: Response, report: (violation: string) => void): Promise<Response> {
    const upper = method.toUpperCase();
    const where = `${upper} ${path} → ${response.status}`;
    const fail = (what: string) => report(`${where}: ${what}`);
    const template = this.#match(path);
    if (template === null) {
      await this.#expectRouterError(upper, response, "not_found", fail, "no path of the OpenAPI document matches it");
      return response;
    }
    const item = this.#document.paths[template] as Json;
    const operation = item[upper.toLowerCase()] as Json | undefined;
    if (operation === undefined) {
      await this.#expectRouterError(upper, response, "method_not_allowed", fail, `the document has no ${upper} operation on ${template}`);
      const allowed = (response.headers.get("allow") ?? "").split(",").map((name) => name.trim().toLowerCase());
      const undocumented = allowed.filter((name) => name !== "" && !(name in item));
      if (undocumented.length > 0) fail(`Allow names methods the document does not have on ${template}: ${undocumented.join(", ")}`);
      return response;
    }
    const operationPointer = `#/paths/${pointerSegment(template)}/${upper.toLowerCase()}`;
    const statuses = Object.keys(operation.responses as Json);
    if (!statuses.includes(String(response.status))) {
      fail(`the document lists ${statuses.join(", ")} for ${upper} ${template}, not ${response.status}${await bodyNote(response)}`);
      return response;
    }
    const answer = this.#resolve({
      value: (operation.responses as Json)[String(response.status)],
      pointer: `${operationPointer}/responses/${response.status}`,
    });
    this.#checkHeaders(answer, response, fail);
    return this.#checkBody(answer, upper, response, fail);
  }

  /** The path template of the document matching `path`, the one with the most literal segments first. */
  #match(path: string): string | null {
    const actual = segmentsOf(path);
    let best: { path: string; literals: number } | null = null;
    for (const template of this.#templates) {
      if (template.segments.length !== actual.length) continue;
      let literals = 0;
      const matches = template.segments.every((segment, index) => {
        if (segment.startsWith("{")) return actual[index] !== "";
        literals++;
        return segment === actual[index];
      });
      if (matches && (best === null || literals > best.literals)) best = { path: template.path, literals };
    }
    return best?.path ?? null;
  }

  /** What the router answers outside the document's operations: the envelope with `code` (its status only, to a HEAD). */
  async #expectRouterError(
    method: string,
    response: Response,
    code: "not_found" | "method_not_allowed",
    fail: (what: string) => void,
    why: string,
  ): Promise<void> {
    if (method === "HEAD") {
      if (response.status !== (code === "not_found" ? 404 : 405)) fail(`${why}, and the answer is not the router's ${code}`);
      return;
    }
    const text = await response.clone().text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const validate = this.#validator("#/components/schemas/ErrorEnvelope");
    if (!validate(body) || (body as { error: { code: string } }).error.code !== code) {
      fail(`${why}, and the answer is not the router's ${code}: ${shorten(text)}`);
    }
  }

  #checkHeaders(answer: Located, response: Response, fail: (what: string) => void): void {
    for (const [name, declared] of Object.entries((answer.value.headers ?? {}) as Json)) {
      const header = this.#resolve({ value: declared, pointer: `${answer.pointer}/headers/${pointerSegment(name)}` });
      const value = response.headers.get(name);
      if (value === null) {
        if (header.value.required === true) fail(`the header ${name} is missing`);
        continue;
      }
      const validate = this.#validator(`${header.pointer}/schema`);
      if (!validate(value)) fail(`the header ${name}: ${JSON.stringify(value)} ${this.#ajv.errorsText(validate.errors, { dataVar: name })}`);
    }
  }

  async #checkBody(answer: Located, method: string, response: Response, fail: (what: string) => void): Promise<Response> {
    const content = answer.value.content as Json | undefined;
    if (content === undefined) {
      if (response.body !== null && !NO_BODY.has(response.status) && method !== "HEAD") {
        const text = await response.clone().text();
        if (text !== "") fail(`the document gives this answer no body, yet it has one: ${shorten(text)}`);
      }
      return response;
    }
    if (method === "HEAD") return response;
    const type = response.headers.get("content-type");
    const essence = type?.split(";")[0]?.trim().toLowerCase() ?? "";
    if (!(essence in content)) {
      fail(`its Content-Type is ${JSON.stringify(type)}, the document lists ${Object.keys(content).join(", ")}${await bodyNote(response)}`);
      return response;
    }
    const schemaPointer = `${answer.pointer}/content/${pointerSegment(essence)}/schema`;
    if (essence === "application/json") {
      const text = await response.clone().text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        fail(`its body is not JSON: ${shorten(text)}`);
        return response;
      }
      const validate = this.#validator(schemaPointer);
      if (!validate(body)) fail(`${this.#ajv.errorsText(validate.errors, { dataVar: "body" })}, in ${shorten(text)}`);
      return response;
    }
    if (essence === "text/event-stream" && response.body !== null) {
      const validate = this.#validator(schemaPointer);
      const events = new EventChecker((event, raw) => {
        if (!validate(event)) fail(`the event ${shorten(raw)}: ${this.#ajv.errorsText(validate.errors, { dataVar: "event" })}`);
      }, fail);
      const body = response.body.pipeThrough(events.stream());
      return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
    }
    return response;
  }

  /** The object at `located`, or the one its `$ref` points to (references of the document only). */
  #resolve(located: Located): Located {
    let current = located;
    for (let hops = 0; typeof current.value.$ref === "string"; hops++) {
      if (hops > 8) throw new Error(`a loop of references at ${located.pointer}`);
      const pointer = current.value.$ref as string;
      current = { value: this.#at(pointer), pointer };
    }
    return current;
  }

  #at(pointer: string): Json {
    let value: unknown = this.#document;
    for (const segment of pointer.replace(/^#\//, "").split("/")) {
      value = (value as Json | undefined)?.[segment.replace(/~1/g, "/").replace(/~0/g, "~")];
    }
    if (typeof value !== "object" || value === null) throw new Error(`nothing at ${pointer} in the OpenAPI document`);
    return value as Json;
  }

  #validator(pointer: string): ValidateFunction {
    let validate = this.#validators.get(pointer);
    if (!validate) {
      validate = this.#ajv.getSchema(`openapi.json${pointer}`);
      if (!validate) throw new Error(`no schema at ${pointer} in the OpenAPI document`);
      this.#validators.set(pointer, validate);
    }
    return validate;
  }
}

/** `/a/{b}/c` or `/a/x/c` as its segments; empty segments are dropped, as the router reads them. */
function segmentsOf(path: string): string[] {
  return path.split("/").filter((segment) => segment !== "");
}

/** The start of a body, to show what came instead; never for a stream, which may not end. */
async function bodyNote(response: Response): Promise<string> {
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) return "";
  const text = await response.clone().text();
  return text === "" ? "" : `: ${shorten(text)}`;
}

/**
 * Reads server-sent events as they pass, without changing a byte: each event (its `data:`
 * lines as JSON, its `id:` when sent) goes to `check`; comment lines are not events; a
 * partial event at the end of a stream that ended is a violation. A stream the client
 * cancels or aborts is not checked further.
 */
class EventChecker {
  readonly #check: (event: Json, raw: string) => void;
  readonly #fail: (what: string) => void;
  readonly #decoder = new TextDecoder();
  #buffer = "";

  constructor(check: (event: Json, raw: string) => void, fail: (what: string) => void) {
    this.#check = check;
    this.#fail = fail;
  }

  stream(): TransformStream<Uint8Array, Uint8Array> {
    return new TransformStream({
      transform: (chunk, controller) => {
        controller.enqueue(chunk);
        this.#buffer += this.#decoder.decode(chunk, { stream: true });
        this.#drain();
      },
      flush: () => {
        this.#buffer += this.#decoder.decode();
        this.#drain();
        if (this.#buffer.trim() !== "") this.#fail(`the stream ended inside an event: ${shorten(this.#buffer)}`);
      },
    });
  }

  #drain(): void {
    for (;;) {
      const match = /\r?\n\r?\n/.exec(this.#buffer);
      if (match === null) return;
      const raw = this.#buffer.slice(0, match.index);
      this.#buffer = this.#buffer.slice(match.index + match[0].length);
      this.#event(raw);
    }
  }

  #event(raw: string): void {
    const data: string[] = [];
    const event: Json = {};
    for (const line of raw.split(/\r?\n/)) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") data.push(value);
      else event[field] = value;
    }
    if (data.length === 0 && Object.keys(event).length === 0) return;
    try {
      event.data = JSON.parse(data.join("\n"));
    } catch {
      this.#fail(`the event's data is not JSON: ${shorten(raw)}`);
      return;
    }
    this.#check(event, raw);
  }
}

/** The answers of the targets the suite is running, checked against the document. */
const conformance = { checker: undefined as OpenApiConformance | undefined, targets: new Set<string>(), violations: [] as string[] };

/** Starts checking the answers of the target served at `url` (its routes under it, as `Harness.url` writes them). */
export function watchTarget(url: string): void {
  conformance.targets.add(url.replace(/\/+$/, ""));
}

/** Stops checking the answers of the target at `url`. */
export function unwatchTarget(url: string): void {
  conformance.targets.delete(url.replace(/\/+$/, ""));
}

/** What to do about a violation, said with each. */
export const FIX =
  "A bug of the service, or a change of it the document does not describe yet: describe it (the zod schemas, the route's `doc`), then run `npm run openapi`.";

/** The violations found since the last call, and forgets them. */
export function takeViolations(): string[] {
  return conformance.violations.splice(0);
}

/** The path of `url` under the watched target it belongs to (the longest), or null. */
function pathUnderTarget(url: string): string | null {
  const { origin, pathname } = new URL(url);
  let found: string | null = null;
  for (const target of conformance.targets) {
    const base = new URL(target);
    const prefix = base.pathname.replace(/\/+$/, "");
    if (base.origin !== origin || (pathname !== prefix && !pathname.startsWith(`${prefix}/`))) continue;
    const rest = pathname.slice(prefix.length) || "/";
    if (found === null || rest.length < found.length) found = rest;
  }
  return found;
}

/**
 * The global `fetch`, with each answer of a watched target checked against the OpenAPI
 * document (see {@link OpenApiConformance}). The contract suite's requests all go through
 * it: a test file imports it in place of the global one.
 */
export async function fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await globalThis.fetch(input, init);
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  const path = pathUnderTarget(url);
  if (path === null) return response;
  const method = init?.method ?? (input instanceof Request ? input.method : "GET");
  conformance.checker ??= new OpenApiConformance();
  const found: string[] = [];
  const checked = await conformance.checker.inspect(method, path, response, (violation) => {
    found.push(violation);
    conformance.violations.push(violation);
  });
  if (found.length > 0) throw new Error(`The answer does not conform to the OpenAPI document (docs/openapi.json):\n${found.join("\n")}\n${FIX}`);
  return checked;
}
