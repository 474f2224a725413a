/**
 * What the browser tests share: Debian's Chromium driven by playwright-core (no browser
 * download), static pages on their own origins, and screenshots under test/output/.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type Browser, chromium, type Page } from "playwright-core";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** Where screenshots go; docs/widget.md shows copies of them. */
export const OUTPUT = join(ROOT, "test", "output");

/** The Chromium to drive: `CHANNELKIT_TEST_CHROMIUM`, else Debian's. */
export const CHROMIUM = process.env.CHANNELKIT_TEST_CHROMIUM ?? "/usr/bin/chromium";

/** Why the browser tests cannot run here, or null. Under CI a missing browser is a failure, not a skip. */
export function browserMissing(): string | null {
  if (existsSync(CHROMIUM)) return null;
  const reason = `no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHANNELKIT_TEST_CHROMIUM)`;
  if (process.env.CI === "true") throw new Error(`browser tests: ${reason}`);
  return reason;
}

/** Headless Chromium with the flags a closed machine needs (no background networking). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"],
  });
}

/** A file a static server answers. */
export interface StaticFile {
  type: string;
  body: string | Buffer;
  headers?: Record<string, string>;
}

/** Serves `files` by path on 127.0.0.1 with a free port: a site of its own origin. */
export async function staticSite(files: (path: string) => StaticFile | undefined): Promise<{ url: string; origin: string; close(): Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://x").pathname;
    const file = files(path);
    if (!file) {
      response.writeHead(404).end("not found");
      return;
    }
    response.writeHead(200, { "content-type": file.type, "cache-control": "no-store", ...file.headers }).end(file.body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${origin}/`,
    origin,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Saves a screenshot of the page as test/output/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(OUTPUT, { recursive: true });
  await page.screenshot({ path: join(OUTPUT, `${name}.png`) });
}

/** Waits for the widget's host to have `state` (its attributes); the host has no box of its own. */
export function hostIs(page: Page, state: string, timeout?: number): Promise<void> {
  return page.locator(`channelkit-chat${state}`).waitFor({ state: "attached", timeout });
}

const TYPES: Record<string, string> = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css" };

/**
 * examples/widget-react as a site owner builds it (Vite), served from its own origin. Built
 * into a folder of its own: test files run in parallel, and two builds into the example's
 * `dist/` would empty it under each other.
 */
export async function reactExampleSite(): Promise<Awaited<ReturnType<typeof staticSite>>> {
  const outDir = await mkdtemp(join(tmpdir(), "channelkit-widget-react-"));
  await promisify(execFile)("npm", ["run", "build", "-w", "channelkit-example-widget-react", "--", "--outDir", outDir, "--emptyOutDir"], { cwd: ROOT });
  const files = new Map<string, StaticFile>();
  for (const entry of await readdir(outDir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(path.slice(outDir.length), { type: TYPES[extname(path)] ?? "application/octet-stream", body: await readFile(path) });
  }
  const site = await staticSite((path) => files.get(path === "/" ? "/index.html" : path));
  return { ...site, close: () => Promise.all([site.close(), rm(outDir, { recursive: true, force: true })]).then(() => {}) };
}
