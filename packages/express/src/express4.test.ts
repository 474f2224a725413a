import { createServer } from "node:http";
import {
  expectExactSignedBody,
  expectPrefixBoundary,
  listenOnFreePort,
  pingPlugin,
  type RunningTarget,
  type ServiceTargetOptions,
  serviceTarget,
  sqliteTestStore,
} from "@channelkit/testkit";
import express from "express";
import { afterEach, describe, expect, it, vi } from "vitest";
import { channelkit, keepRawBody, mountChannelkit } from "./index.js";

// This file runs the adapter on Express 4 (the `express4` alias of the root devDependencies):
// "express" resolves to it here, for this file and for the adapter it imports.
// @ts-expect-error: the alias has no types of its own; "express"'s types describe it well enough here.
vi.mock("express", () => import("express4"));

const running: RunningTarget[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((item) => item.close()));
});

async function start(
  mount: (app: express.Express, service: Parameters<typeof channelkit>[0]) => void,
  prefix: string,
  serviceOptions?: ServiceTargetOptions["service"],
) {
  let origin = "";
  const target = serviceTarget({
    name: "express 4",
    store: sqliteTestStore,
    ...(serviceOptions ? { service: serviceOptions } : {}),
    listen: async (service) => {
      const app = express();
      mount(app, service);
      app.get("/health", (_req, res) => void res.send("ok"));
      app.use((_req, res) => void res.status(404).json({ host: "not found" }));
      const server = await listenOnFreePort(createServer(app));
      origin = server.url;
      return { ...server, url: server.url + prefix };
    },
  });
  const started = await target.start({});
  running.push(started);
  return { ...started, origin };
}

describe("express 4", () => {
  it("is what this file runs on", () => {
    expect(() => (express() as unknown as { router: unknown }).router).toThrow(/deprecated/);
  });

  it("mountChannelkit after a global express.json(): host routes and 404 kept, signatures verify over the raw bytes", async () => {
    const target = await start((app, service) => {
      app.use(express.json());
      mountChannelkit(app, service, { path: "/chat" });
    }, "/chat");
    expect(await (await fetch(`${target.origin}/health`)).text()).toBe("ok");
    expect(await (await fetch(`${target.origin}/chat/nope`)).json()).toEqual({ host: "not found" });
    await expectExactSignedBody(target);
  });

  it("channelkit(service) after express.json({ verify: keepRawBody })", async () => {
    const target = await start((app, service) => {
      app.use(express.json({ verify: keepRawBody }));
      app.use(channelkit(service));
    }, "");
    await expectExactSignedBody(target);
  });

  it("a prefix ends at a path-segment boundary: /chatping-style paths get the host's 404", async () => {
    const mounted = await start((app, service) => mountChannelkit(app, service, { path: "/chat" }), "/chat", { plugins: [pingPlugin] });
    await expectPrefixBoundary({ origin: mounted.origin, prefix: "/chat", admin: mounted.admin });
    const based = await start((app, service) => app.use(channelkit(service)), "/chat", { basePath: "/chat", plugins: [pingPlugin] });
    await expectPrefixBoundary({ origin: based.origin, prefix: "/chat", admin: based.admin });
  });
});
