import { type ChannelPlugin, defineRoute } from "@channelkit/core";

/** Escapes a value for an HTML attribute. */
function attribute(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
}

/**
 * The demo's page at `/`: a short explanation and the widget, embedded with the one tag a
 * site owner pastes, served by this very service (`/public/widget/widget.js`).
 */
export function demoPage(publishableKey: () => string | null): ChannelPlugin {
  const page = (key: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>channelkit demo</title>
<link rel="icon" href="data:,">
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; padding: 0 1rem; color: #1f2937; }
  code { background: #f3f4f6; padding: 0.1rem 0.3rem; border-radius: 0.25rem; }
  pre { white-space: pre-wrap; word-break: break-all; }
</style>
</head>
<body>
<main>
<h1>channelkit demo</h1>
<p>The chat button in the corner is the channelkit widget, talking to the demo's <code>echo</code> flow through this server's widget channel. It streams each reply as it is written and keeps the conversation across reloads.</p>
<p>It is embedded with one tag:</p>
<pre><code>&lt;script src="/public/widget/widget.js" data-key="${attribute(key)}" defer&gt;&lt;/script&gt;</code></pre>
</main>
<script src="/public/widget/widget.js" data-key="${attribute(key)}" defer></script>
</body>
</html>
`;
  return {
    id: "demo-page",
    routes: [
      defineRoute({
        method: "GET",
        path: "/",
        auth: "none",
        rateLimited: false,
        doc: {
          operationId: "demoPage",
          summary: "The demo's page",
          description: "A short explanation and the widget, embedded with the one tag a site owner pastes (`channelkit serve --demo`).",
          tag: { name: "Demo", description: "The page of `channelkit serve --demo`." },
          responses: {
            200: { description: "The page.", other: { mediaType: "text/html", description: "The demo's page." }, headers: ["Cache-Control-No-Store"] },
            404: { description: "The database has no widget channel of the demo.", other: { mediaType: "text/plain", description: "What to do." } },
          },
          errors: [],
        },
        handle: () => {
          const key = publishableKey();
          if (key === null) {
            return new Response("The demo has no widget channel in this database: start over with a new one (delete channelkit.db).\n", {
              status: 404,
              headers: { "content-type": "text/plain; charset=utf-8" },
            });
          }
          return new Response(page(key), { headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" } });
        },
      }),
    ],
  };
}
