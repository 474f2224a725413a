import { describe, expect, it } from "vitest";
import { ServiceError } from "./errors.js";
import { parseJson, readRawBody, requireJsonContentType } from "./body.js";

const URL_ = "http://localhost/public/v1/api/execute";

/** A request whose body arrives as the given chunks, counting how many the reader pulled. */
function streamedRequest(chunks: Uint8Array[], headers: Record<string, string> = {}) {
  const stats = { pulled: 0, cancelled: false };
  const body = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const next = chunks[stats.pulled];
        if (next === undefined) return controller.close();
        stats.pulled++;
        controller.enqueue(next);
      },
      cancel() {
        stats.cancelled = true;
      },
    },
    { highWaterMark: 0 },
  );
  const request = new Request(URL_, { method: "POST", body, headers, duplex: "half" } as RequestInit);
  return { request, stats };
}

async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ServiceError);
  return error as ServiceError;
}

describe("readRawBody", () => {
  it("returns the exact bytes, including invalid UTF-8, NUL and a BOM", async () => {
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x00, 0xff, 0xc3, 0x28, 0x0d, 0x0a, 0x7d]);
    const body = await readRawBody(new Request(URL_, { method: "POST", body: bytes }), 1024);
    expect([...body]).toEqual([...bytes]);
  });

  it("joins a body that arrives in several chunks, in order", async () => {
    const chunks = [new Uint8Array([1, 2, 3]), new Uint8Array([]), new Uint8Array([4]), new Uint8Array([5, 6])];
    const { request } = streamedRequest(chunks);
    expect([...(await readRawBody(request, 6))]).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("returns an empty array for a request without a body", async () => {
    expect((await readRawBody(new Request(URL_), 10)).byteLength).toBe(0);
    expect((await readRawBody(new Request(URL_, { method: "POST" }), 10)).byteLength).toBe(0);
  });

  it("accepts a body of exactly the limit", async () => {
    const body = new Uint8Array(100).fill(7);
    expect((await readRawBody(new Request(URL_, { method: "POST", body }), 100)).byteLength).toBe(100);
  });

  it("refuses a declared Content-Length over the limit without reading the body", async () => {
    const { request, stats } = streamedRequest([new Uint8Array(10)], { "content-length": "101" });
    const error = await failure(readRawBody(request, 100));
    expect(error.code).toBe("payload_too_large");
    expect(error.status).toBe(413);
    expect(stats.pulled).toBe(0);
  });

  it("refuses a streamed body once it grows over the limit, and stops reading it", async () => {
    const chunks = Array.from({ length: 50 }, () => new Uint8Array(40));
    const { request, stats } = streamedRequest(chunks);
    const error = await failure(readRawBody(request, 100));
    expect(error.code).toBe("payload_too_large");
    // 40 + 40 + 40 > 100: the third chunk is the last one read.
    expect(stats.pulled).toBe(3);
    expect(stats.cancelled).toBe(true);
  });

  it("does not trust a small Content-Length: the streamed size is checked too", async () => {
    const { request } = streamedRequest([new Uint8Array(80), new Uint8Array(80)], { "content-length": "10" });
    expect((await failure(readRawBody(request, 100))).code).toBe("payload_too_large");
  });
});

describe("parseJson", () => {
  const encode = (text: string) => new TextEncoder().encode(text);

  it("parses UTF-8 JSON", () => {
    expect(parseJson(encode('{"payload":"héllo 👋","n":[1,2]}'))).toEqual({ payload: "héllo 👋", n: [1, 2] });
  });

  it.each([
    ["invalid UTF-8", new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])],
    ["a truncated multi-byte sequence", new Uint8Array([0x22, 0xe2, 0x82, 0x22])],
    ["invalid JSON", encode('{"payload": }')],
    ["an empty body", new Uint8Array(0)],
    ["trailing garbage", encode('{"a":1} x')],
  ])("turns %s into a 422 validation_error", (_name, bytes) => {
    let error: unknown;
    try {
      parseJson(bytes);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe("validation_error");
    expect((error as ServiceError).status).toBe(422);
  });
});

describe("requireJsonContentType", () => {
  const withType = (type?: string) => new Request(URL_, { method: "POST", body: "{}", headers: type === undefined ? {} : { "content-type": type } });

  it("accepts application/json with or without parameters, in any case", () => {
    for (const type of ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8", " application/json "]) {
      expect(() => requireJsonContentType(withType(type))).not.toThrow();
    }
  });

  it("refuses multipart, text and JSON look-alikes with 415", () => {
    for (const type of [
      "multipart/form-data; boundary=x",
      "text/plain",
      "application/jsonp",
      "application/x-www-form-urlencoded",
      "application/vnd.api+json",
    ]) {
      let error: unknown;
      try {
        requireJsonContentType(withType(type));
      } catch (e) {
        error = e;
      }
      expect((error as ServiceError).code, type).toBe("unsupported_media_type");
      expect((error as ServiceError).status).toBe(415);
    }
  });

  it("refuses a request without Content-Type", () => {
    const request = new Request(URL_, { method: "POST", body: new Uint8Array([1]) });
    expect(request.headers.get("content-type")).toBeNull();
    expect(() => requireJsonContentType(request)).toThrow(ServiceError);
  });
});
