import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type D1Binding, d1 } from "@channelkit/kysely/d1";

// channelkit as a Cloudflare Worker: its fetch is the service's Web handler, on D1. The
// service is made by the isolate's first request (the bindings come with the requests) and
// kept for the next ones. Migrate once per deploy (run.mjs does it here), not per isolate.

interface Env {
  DB: D1Binding;
  CHANNELKIT_SECRET_KEY?: string;
}

let service: Promise<ChannelService> | undefined;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    service ??= createChannelService({ storage: d1(env.DB), flows: demoFlows, secretKey: env.CHANNELKIT_SECRET_KEY }).catch((error) => {
      service = undefined;
      throw error;
    });
    return (await service).handler(request, { clientAddress: request.headers.get("CF-Connecting-IP") ?? undefined });
  },
};
