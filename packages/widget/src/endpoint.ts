/** The path the loader is served at by `widgetAsset()`, relative to the service's base URL. */
export const LOADER_PATH = "/public/widget/widget.js";

/**
 * The service's base URL from the loader's own URL: that URL minus {@link LOADER_PATH} (a
 * service mounted under a prefix keeps it), else the script's origin.
 */
export function endpointOfScript(src: string): string {
  const url = new URL(src);
  const path = url.pathname.endsWith(LOADER_PATH) ? url.pathname.slice(0, -LOADER_PATH.length) : "";
  return url.origin + path.replace(/\/+$/, "");
}

/** An `endpoint` attribute as an absolute base URL without a trailing slash; relative to the page, the page's origin when empty. */
export function resolveEndpoint(value: string | null, page: string): string {
  const url = new URL(value?.trim() || "/", page);
  return url.origin + url.pathname.replace(/\/+$/, "");
}
