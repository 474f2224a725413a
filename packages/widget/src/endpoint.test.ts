import { describe, expect, it } from "vitest";
import { endpointOfScript, resolveEndpoint } from "./endpoint.js";

describe("endpointOfScript", () => {
  it("is the script's URL minus /public/widget/widget.js, a mount prefix kept", () => {
    expect(endpointOfScript("https://chat.example/public/widget/widget.js")).toBe("https://chat.example");
    expect(endpointOfScript("http://127.0.0.1:3000/public/widget/widget.js?v=2#x")).toBe("http://127.0.0.1:3000");
    expect(endpointOfScript("https://app.example/chat/public/widget/widget.js")).toBe("https://app.example/chat");
  });

  it("is the script's origin when it is served from elsewhere (a CDN: data-endpoint is then needed)", () => {
    expect(endpointOfScript("https://cdn.example/channelkit/widget.js")).toBe("https://cdn.example");
  });
});

describe("resolveEndpoint", () => {
  const page = "https://shop.example/products/1?x=y";

  it("takes an absolute URL without its trailing slash", () => {
    expect(resolveEndpoint("https://chat.example/", page)).toBe("https://chat.example");
    expect(resolveEndpoint("https://chat.example/base//", page)).toBe("https://chat.example/base");
  });

  it("resolves a relative one against the page, and is the page's origin when absent", () => {
    expect(resolveEndpoint("/chat", page)).toBe("https://shop.example/chat");
    expect(resolveEndpoint(null, page)).toBe("https://shop.example");
    expect(resolveEndpoint("  ", page)).toBe("https://shop.example");
  });
});
