import { expectPrefixBoundary, pingPlugin, serviceTarget, sqliteTestStore } from "@channelkit/testkit";
import { describe, it } from "vitest";
import { serve } from "./serve.js";

describe("node:http: the service's basePath ends at a path-segment boundary", () => {
  it.each(["/chat", "/api/chat"])("basePath %j: /chatping-style paths get the 404 of any unknown path", async (basePath) => {
    let origin = "";
    const target = serviceTarget({
      name: "node:http",
      store: sqliteTestStore,
      service: { basePath, plugins: [pingPlugin] },
      listen: async (service) => {
        const server = await serve(service, { port: 0 });
        origin = server.url;
        return { url: server.url + basePath, close: () => server.close() };
      },
    });
    const started = await target.start({});
    try {
      await expectPrefixBoundary({ origin, prefix: basePath, admin: started.admin });
    } finally {
      await started.close();
    }
  });
});
