import type { z } from "zod";
import { resolveLocale, widgetConfig } from "./config-resolve.js";
import type { widgetConfigQuerySchema } from "./schemas.js";
import { authenticateRequest, json, type Reply, type RouteCall, type ServiceContext } from "../../plugin/api.js";

type ConfigQuery = z.output<typeof widgetConfigQuerySchema>;

/**
 * `GET /public/widget/config[?locale=xx_XX]`: the channel's widget configuration in the
 * requested language, else the best match of `Accept-Language`, else its first language.
 */
export async function config(call: RouteCall<string, ConfigQuery>, ctx: ServiceContext): Promise<Reply> {
  const { request } = call;
  const { channel } = await authenticateRequest(request, ctx, { publicKeyOnly: true });
  const query = call.query();
  const locale = resolveLocale(channel.languages, query.locale ?? null, request.headers.get("accept-language"));
  // Settings can change at any time (an admin, another instance): never cached by a browser.
  return json(widgetConfig(channel, locale, ctx.livechat.provider !== null), 200, { "cache-control": "no-store" });
}
