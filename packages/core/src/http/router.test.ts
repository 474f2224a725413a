import { describe, expect, it } from "vitest";
import { ServiceError } from "./errors.js";
import type { IncomingRequest, Reply } from "./reply.js";
import { json } from "./respond.js";
import { type RouteParams, Router } from "./router.js";

type Ctx = { tag: string };

function router() {
  const handle = (name: string) => (_request: IncomingRequest, params: RouteParams, ctx: Ctx) => json({ name, params, tag: ctx.tag });
  return new Router<Ctx>()
    .add({ method: "OPTIONS", path: "/public/v1/api/execute", handle: handle("preflight") })
    .add({ method: "POST", path: "/public/v1/api/execute", handle: handle("execute") })
    .add({ method: "GET", path: "/public/v1/api/conversations/:session_id/messages", handle: handle("history") })
    .add({ method: "get", path: "/a/:x/b/:y", handle: handle("two") });
}

function failure(run: () => unknown): ServiceError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceError);
    return error as ServiceError;
  }
  throw new Error("expected the router to throw");
}

describe("Router", () => {
  it("finds the route of a method and path", async () => {
    const { route, params } = router().match("POST", "/public/v1/api/execute");
    expect(params).toEqual({});
    const reply = (await route.handle(new Request("http://x/"), params, { tag: "ctx" })) as Reply;
    expect(JSON.parse(reply.body as string)).toEqual({ name: "execute", params: {}, tag: "ctx" });
    expect(router().match("OPTIONS", "/public/v1/api/execute").route.method).toBe("OPTIONS");
  });

  it("captures :name segments, percent-decoded", () => {
    const { route, params } = router().match("GET", "/public/v1/api/conversations/abc%20d%2Fe/messages");
    expect(route.path).toBe("/public/v1/api/conversations/:session_id/messages");
    expect(params).toEqual({ session_id: "abc d/e" });
    expect(router().match("GET", "/a/1/b/2").params).toEqual({ x: "1", y: "2" });
  });

  it("upper-cases route methods", () => {
    expect(router().match("GET", "/a/1/b/2").route.method).toBe("GET");
  });

  it("finds a route without parameters by its path as the first match, as a route with them", async () => {
    const handle = (name: string) => () => json({ name });
    const table = new Router<Ctx>()
      .add({ method: "GET", path: "/a/:x", handle: handle("param first") })
      .add({ method: "GET", path: "/a/b", handle: handle("taken by the one before") })
      .add({ method: "POST", path: "/a/b", handle: handle("static") })
      .add({ method: "POST", path: "/a/:x", handle: handle("param after") })
      .add({ method: "GET", path: "/", handle: handle("root") })
      .add({ method: "GET", path: "//c//d/", handle: handle("written loosely") });
    const name = async (method: string, path: string) => {
      const { route, params } = table.match(method, path);
      return { name: JSON.parse(((await route.handle(new Request("http://x/"), params, { tag: "" })) as Reply).body as string).name, params };
    };
    expect(await name("GET", "/a/b")).toEqual({ name: "param first", params: { x: "b" } });
    expect(await name("POST", "/a/b")).toEqual({ name: "static", params: {} });
    expect(await name("POST", "/a/c")).toEqual({ name: "param after", params: { x: "c" } });
    expect(await name("GET", "/")).toEqual({ name: "root", params: {} });
    expect(await name("GET", "/c/d")).toEqual({ name: "written loosely", params: {} });
    expect(await name("GET", "/c/d/")).toEqual({ name: "written loosely", params: {} });
    // Each match has params of its own.
    expect(table.match("POST", "/a/b").params).not.toBe(table.match("POST", "/a/b").params);
    const error = failure(() => table.match("DELETE", "/a/b"));
    expect(error.code).toBe("method_not_allowed");
    expect(error.headers).toEqual({ allow: "GET, POST" });
  });

  it("ignores repeated and trailing slashes", () => {
    expect(router().match("POST", "/public/v1/api/execute/").route.method).toBe("POST");
    expect(router().match("POST", "//public/v1//api/execute").route.method).toBe("POST");
  });

  it("answers 404 not_found for an unknown path, a longer or shorter path, and a different literal", () => {
    for (const path of ["/", "/nope", "/public/v1/api", "/public/v1/api/execute/more", "/public/v2/api/execute", "/PUBLIC/v1/api/execute"]) {
      const error = failure(() => router().match("POST", path));
      expect(error.code).toBe("not_found");
      expect(error.status).toBe(404);
    }
  });

  it("does not let a parameter match an empty segment", () => {
    expect(failure(() => router().match("GET", "/public/v1/api/conversations//messages")).code).toBe("not_found");
  });

  it("answers 404 when a parameter is not valid percent-encoding", () => {
    expect(failure(() => router().match("GET", "/public/v1/api/conversations/%E0%A4%A/messages")).code).toBe("not_found");
  });

  it("answers 405 with an Allow header listing the methods of the path", () => {
    const error = failure(() => router().match("GET", "/public/v1/api/execute"));
    expect(error.code).toBe("method_not_allowed");
    expect(error.status).toBe(405);
    expect(error.headers).toEqual({ allow: "OPTIONS, POST" });

    const history = failure(() => router().match("DELETE", "/public/v1/api/conversations/x/messages"));
    expect(history.status).toBe(405);
    expect(history.headers?.allow).toBe("GET");
  });
});
