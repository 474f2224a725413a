import type { ChannelService } from "@channelkit/core";
import { signAdminToken } from "./admin-token.js";
import type { Io } from "./commands.js";

/**
 * On a first start with an empty database, creates a demo tenant and an `echo` channel and
 * prints its key, once, with a curl line that works as pasted.
 */
export async function provisionDemo(service: ChannelService, url: string, io: Io): Promise<void> {
  if ((await service.admin.countTenants()) > 0) {
    io.out("Demo: the database already has tenants; no new key was created. Make a new one with:");
    io.out("  npx channelkit channel rotate-key <channel id> --db <this database>");
    return;
  }
  const { tenant } = await service.admin.createTenant({ name: "Demo" });
  const created = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", name: "Demo echo", environment: "prod" });
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
}

/** How to call the admin routes on the demo channel: a ready line when admin tokens can be signed, else how to enable them. */
async function printAdmin(url: string, tenantId: string, channelId: string, io: Io): Promise<void> {
  const secret = io.env.CHANNELKIT_ADMIN_JWT_SECRET;
  if (!secret) {
    io.out("Admin routes (rotate keys and secrets over HTTP): start with CHANNELKIT_ADMIN_JWT_SECRET=$(openssl rand -hex 32) to use them (docs/security.md).");
    return;
  }
  const token = await signAdminToken(io.env, [tenantId], undefined, "1h");
  io.out(`Admin: a token for the demo tenant, valid 1 h (more with: npx channelkit admin-token --tenant ${tenantId}). Rotate the key:`);
  io.out(`  curl -s -X POST ${url}/api/v1/channels/${channelId}/rotate-key -H 'Authorization: Bearer ${token}' -H 'X-Tenant-ID: ${tenantId}'`);
}
