// The one-tag embed, built as `dist/widget.js`:
//   <script src="https://host/public/widget/widget.js" data-key="svc_pub_…" defer></script>
// defines <channelkit-chat> and adds one to the page, configured from the tag's data attributes.
import { defineChannelkitChat } from "./define.js";
import { endpointOfScript } from "./endpoint.js";

const TAG = "channelkit-chat";

function mount(script: HTMLScriptElement | null): void {
  const key = script?.dataset.key ?? "";
  // The same tag pasted twice is one widget.
  for (const existing of document.querySelectorAll(TAG)) if (existing.getAttribute("key") === key) return;
  const element = document.createElement(TAG);
  element.setAttribute("key", key);
  if (!key) console.error("channelkit widget: the script tag has no data-key (the channel's publishable key, svc_pub_…)");
  const endpoint = script?.dataset.endpoint || (script?.src ? endpointOfScript(script.src) : location.origin);
  element.setAttribute("endpoint", endpoint);
  if (script?.dataset.locale) element.setAttribute("locale", script.dataset.locale);
  document.body.append(element);
}

// Read now: `currentScript` is only set while this script runs.
const script = (document.currentScript as HTMLScriptElement | null) ?? document.querySelector<HTMLScriptElement>("script[data-key][src*='widget.js']");
defineChannelkitChat(TAG);
if (document.body) mount(script);
else document.addEventListener("DOMContentLoaded", () => mount(script), { once: true });
