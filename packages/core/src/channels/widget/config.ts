import { authenticateRequest } from "../../auth/authenticate.js";
import type { ServiceContext } from "../../context.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import { resolveLocale, widgetConfig } from "./config-resolve.js";
import { widgetConfigQuerySchema } from "./schemas.js";

/**
 * `GET /public/widget/config[?locale=xx_XX]`: the channel's widget configuration in the
 * requested language, else the best match of `Accept-Language`, else its first language.
 */
export async function config(request: IncomingRequest, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateRequest(request, ctx, { publicKeyOnly: true });
  const query = validate(widgetConfigQuerySchema, { locale: new URL(request.url).searchParams.get("locale") ?? undefined });
  const locale = resolveLocale(channel.languages, query.locale ?? null, request.headers.get("accept-language"));
  // Settings can change at any time (an admin, another instance): never cached by a browser.
  return json(widgetConfig(channel, locale, ctx.livechat.provider !== null), 200, { "cache-control": "no-store" });
}
