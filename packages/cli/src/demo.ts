import { readFile, writeFile } from "node:fs/promises";
import type { ChannelAdmin, ChannelService } from "@channelkit/core";
import { signAdminToken } from "./admin-token.js";
import type { Io } from "./commands.js";

/** The demo's publishable channel, once known: the page at `/` embeds the widget with its key. */
export interface DemoWidget {
  channelId: string;
  key: string;
}

/**
 * Where the demo remembers its widget channel across restarts: beside a SQLite file (a
 * publishable key is meant to be public; the page needs it on every start). None for
 * Postgres, where the page is offered on the first start only.
 */
function sidecarOf(db: string): string | null {
  return /^postgres(ql)?:\/\//.test(db) ? null : `${db}.demo-widget.json`;
}

/** The origins a browser on the demo's own page sends. */
function demoOrigins(url: string): string[] {
  const { port, protocol } = new URL(url);
  return [`${protocol}//127.0.0.1:${port}`, `${protocol}//localhost:${port}`];
}

/**
 * On a first start with an empty database, creates a demo tenant with an `echo` channel (its
 * key printed once, with a curl line that works as pasted) and a publishable channel for the
 * widget on the page at `/`. On later starts, finds the widget channel again (and allows the
 * current port's origins). Answers the widget channel, or null when there is none.
 */
export async function provisionDemo(service: ChannelService, url: string, db: string, io: Io): Promise<DemoWidget | null> {
  const admin = service.admin.as("demo");
  if ((await admin.countTenants()) > 0) {
    const widget = await knownWidget(admin, url, db);
    const target = await printChannels(admin, db, widget, io);
    // The first start told the user to restart with the secret for a token: a restart gives one.
    if (target) await printAdmin(url, target.tenant_id, target.id, io);
    if (widget) printWidget(url, widget, io);
    return widget;
  }
  const { tenant } = await admin.createTenant({ name: "Demo" });
  const created = await admin.createChannel({ tenantId: tenant.id, flow: "echo", name: "Demo echo", environment: "prod" });
  const body = JSON.stringify({ payload: "Hello, channelkit!" });
  io.out("Demo tenant and echo channel created.");
  io.out(`  channel: ${created.channel.id}`);
  io.out(`  API key (shown once, keep it): ${created.api_key}`);
  io.out("Try it:");
  io.out(`  curl -s ${url}/public/v1/api/execute -H 'Authorization: Bearer ${created.api_key}' -H 'Content-Type: application/json' -d '${body}'`);
  io.out("Streamed:");
  io.out(
    `  curl -N ${url}/public/v1/api/execute -H 'Authorization: Bearer ${created.api_key}' -H 'Content-Type: application/json' -d '${JSON.stringify({ payload: "Hello, channelkit!", stream: true })}'`,
  );
  await printAdmin(url, tenant.id, created.channel.id, io);

  const published = await admin.createChannel({ tenantId: tenant.id, flow: "echo", name: "Demo widget", mode: "public", allowedOrigins: demoOrigins(url) });
  const widget = { channelId: published.channel.id, key: published.api_key };
  const sidecar = sidecarOf(db);
  if (sidecar) await writeFile(sidecar, `${JSON.stringify(widget)}\n`);
  printWidget(url, widget, io);
  return widget;
}

/** How many channels a later start lists; `channel list` prints them all. */
const LISTED = 10;

/** `--db VALUE` for a command line printed for this database: none for the default, a placeholder for a URL (it may hold a password). */
function dbFlag(db: string): string {
  if (db === "./channelkit.db" || db === "channelkit.db") return "";
  if (/^postgres(ql)?:\/\//.test(db)) return " --db <this database>";
  return /^[\w./:@%+=,-]+$/.test(db) ? ` --db ${db}` : ` --db '${db.replaceAll("'", "'\\''")}'`;
}

/**
 * On a later start: the channels of the database with their ids (no key is shown again: only
 * a hash is stored), and the command line that makes a new key for the first server channel.
 * Answers that channel, or null when there is none.
 */
async function printChannels(admin: ChannelAdmin, db: string, widget: DemoWidget | null, io: Io): Promise<{ id: string; tenant_id: string } | null> {
  const { channels } = await admin.listChannels();
  const flag = dbFlag(db);
  io.out(`Demo: the database already has tenants; no new key was created. Its channels (all of them: npx channelkit channel list${flag}):`);
  for (const channel of channels.slice(0, LISTED)) {
    const name = channel.name === null ? "" : ` "${channel.name}"`;
    io.out(
      `  ${channel.id}  flow ${channel.flow}, ${channel.type}, ${channel.mode}, ${channel.environment}, ${channel.state}${name}, key ${channel.api_key_hint ?? "none"}`,
    );
  }
  if (channels.length > LISTED) io.out(`  ... and ${channels.length - LISTED} more`);
  const usable = channels.filter((channel) => channel.state !== "archived" && channel.id !== widget?.channelId);
  const target = usable.find((channel) => channel.mode === "server") ?? usable[0];
  io.out("Make a new key for one (its old key stops working):");
  io.out(`  npx channelkit channel rotate-key ${target?.id ?? "<channel id>"}${flag}`);
  return target ?? null;
}

/** The widget channel a previous start created, with the current origins allowed. */
async function knownWidget(admin: ChannelAdmin, url: string, db: string): Promise<DemoWidget | null> {
  const sidecar = sidecarOf(db);
  if (!sidecar) return null;
  let widget: DemoWidget;
  try {
    widget = JSON.parse(await readFile(sidecar, "utf8")) as DemoWidget;
    const { channel } = await admin.getChannel(widget.channelId);
    const missing = demoOrigins(url).filter((origin) => !channel.allowed_origins.includes(origin));
    if (missing.length > 0) await admin.updateChannel(widget.channelId, { allowedOrigins: [...channel.allowed_origins, ...missing] });
  } catch {
    return null;
  }
  return widget;
}

function printWidget(url: string, widget: DemoWidget, io: Io): void {
  io.out(`Widget: open ${url}/ for a page with the chat widget (publishable key ${widget.key}). Embed it on a page of your own with:`);
  io.out(`  <script src="${url}/public/widget/widget.js" data-key="${widget.key}" defer></script>`);
  io.out(`  (from an origin the channel allows: npx channelkit channel update ${widget.channelId} --allowed-origin <origin> ...)`);
}

/** How to call the admin routes on a channel of the demo: a ready line when admin tokens can be signed (every start), else how to enable them. */
async function printAdmin(url: string, tenantId: string, channelId: string, io: Io): Promise<void> {
  const secret = io.env.CHANNELKIT_ADMIN_JWT_SECRET;
  if (!secret) {
    io.out("Admin routes (rotate keys and secrets over HTTP): start with CHANNELKIT_ADMIN_JWT_SECRET=$(openssl rand -hex 32) to use them (docs/security.md).");
    return;
  }
  const token = await signAdminToken(io.env, [tenantId], undefined, "1h");
  io.out(`Admin: a token for tenant ${tenantId}, valid 1 h (more with: npx channelkit admin-token --tenant ${tenantId}). Rotate the key:`);
  io.out(`  curl -s -X POST ${url}/api/v1/channels/${channelId}/rotate-key -H 'Authorization: Bearer ${token}' -H 'X-Tenant-ID: ${tenantId}'`);
}
