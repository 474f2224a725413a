import { createChannelService, memoryStorage, type WidgetStrings as ServerStrings } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describe, expect, it } from "vitest";
import { FALLBACK_CONFIG, FALLBACK_STRINGS, resolveConfig } from "./config.js";
import type { WidgetStrings } from "./types.js";

// Compile-time: what the service answers is what the widget reads (root `npm run typecheck`).
const _serverStringsFit = (strings: ServerStrings): WidgetStrings => strings;

describe("the fallback strings", () => {
  it("are the service's English defaults, word for word: an error before the config loads reads as the config would", async () => {
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, secretKey: "ab".repeat(32) });
    const { tenant } = await service.admin.createTenant({ name: "T" });
    const { api_key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", mode: "public" });
    const response = await service.handler(new Request("http://service.test/public/widget/config", { headers: { authorization: `Bearer ${api_key}` } }));
    // Live-chat texts aside: the widget shows none before a configuration says which.
    const { livechat: _served, ...served } = ((await response.json()) as { strings: Record<string, unknown> }).strings;
    const { livechat: _fallback, ...fallback } = FALLBACK_STRINGS;
    expect(served).toEqual(fallback);
    await service.close();
  });
});

describe("resolveConfig", () => {
  it("reads every field of a configuration the service answers, unchanged", async () => {
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, secretKey: "ab".repeat(32) });
    const { tenant } = await service.admin.createTenant({ name: "T" });
    const { api_key } = await service.admin.createChannel({
      tenantId: tenant.id,
      flow: "echo",
      mode: "public",
      languages: ["en_US", "fr_FR"],
      widget: {
        theme: { primary_color: "#0f766e", position: "bottom-left", color_scheme: "dark" },
        features: { history: false },
        strings: { fr_FR: { suggestions: ["Bonjour", "Aide"] } },
      },
    });
    const response = await service.handler(
      new Request("http://service.test/public/widget/config?locale=fr_FR", { headers: { authorization: `Bearer ${api_key}` } }),
    );
    expect(response.status).toBe(200);
    const { default_stream: _, ...body } = (await response.json()) as Record<string, unknown>;
    expect(resolveConfig(body)).toEqual(body);
    expect(resolveConfig(body).strings.greeting).toBe("Bonjour ! Comment puis-je vous aider ?");
    await service.close();
  });

  it("is the built-in English configuration for nothing usable", () => {
    for (const body of [undefined, null, "oops", 42, [], {}]) expect(resolveConfig(body)).toEqual(FALLBACK_CONFIG);
  });

  it("fills each missing or malformed field from the built-in one, keeping the rest", () => {
    const config = resolveConfig({
      locale: "fr_FR",
      strings: { title: "Aide", subtitle: "", send: 3, suggestions: ["Un", "", 7, "Deux"], errors: { network: "Hors ligne" } },
      theme: { primary_color: "#0F766E", position: "top-left", color_scheme: "sepia" },
      features: { suggestions: false, history: "yes" },
    });
    expect(config.locale).toBe("fr_FR");
    expect(config.strings.title).toBe("Aide");
    expect(config.strings.subtitle).toBe(FALLBACK_STRINGS.subtitle);
    expect(config.strings.send).toBe(FALLBACK_STRINGS.send);
    expect(config.strings.suggestions).toEqual(["Un", "Deux"]);
    expect(config.strings.errors).toEqual({ ...FALLBACK_STRINGS.errors, network: "Hors ligne" });
    expect(config.theme).toEqual({ primary_color: "#0F766E", position: "bottom-right", color_scheme: "auto" });
    expect(config.features).toEqual({ suggestions: false, history: true, livechat: false });
  });

  it("lets nothing but a #rrggbb colour reach the stylesheet", () => {
    for (const primary_color of ["red", "#fff", "#4f46e5;}body{display:none", "url(x)", "var(--x)"]) {
      expect(resolveConfig({ theme: { primary_color } }).theme.primary_color).toBe(FALLBACK_CONFIG.theme.primary_color);
    }
  });
});
