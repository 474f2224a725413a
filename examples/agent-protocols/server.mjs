// One flow served over three agent protocols at once, MCP, A2A and AG-UI, with @channelkit/protocols.
//   CHANNELKIT_DB               SQLite file, or a postgres:// URL (default ./agent-protocols.db)
//   CHANNELKIT_SECRET_KEY       the master key (without it, a public development key, with a warning)
//   CHANNELKIT_EXAMPLE_CONFIG   the JSON file the channels' endpoints and keys are written to, for
//                               the client scripts (default ./agent-protocols.json)
//   PORT, HOST                  where to listen (default 3000 on 127.0.0.1)
import { readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { createChannelService, defineFlow, text } from "@channelkit/core";
import { openStorage } from "@channelkit/kysely";
import { serve } from "@channelkit/node";
import { a2aChannels, aguiChannels, mcpChannels } from "@channelkit/protocols";

/**
 * Takes a note and counts the notes of its conversation from the history: a client that
 * continues a conversation (MCP's conversation_id, A2A's contextId, AG-UI's threadId) sees the
 * count go up, on any instance.
 */
const notes = defineFlow({
  name: "notes",
  version: "1",
  async *run(ctx) {
    const earlier = (await ctx.history(1000)).filter((message) => message.role === "user").map((message) => message.content);
    const before = earlier.length === 0 ? "" : ` Before it: ${earlier.join(" / ")}.`;
    yield text(`Noted "${ctx.payload}": note ${earlier.length + 1} of this conversation.${before}`);
    return { notes: earlier.length + 1 };
  },
});

/** The example's channels: one per protocol, each with the settings its protocol shows its clients. */
const CHANNELS = [
  {
    type: "mcp",
    label: "MCP",
    name: "Notes over MCP",
    settings: {
      tool_name: "take_note",
      tool_description: "Takes a note and says how many notes the conversation holds. Pass the conversation_id of an earlier answer to add to it.",
    },
  },
  {
    type: "a2a",
    label: "A2A",
    name: "Notes over A2A",
    settings: {
      name: "Notes agent",
      description: "Takes notes, a conversation (contextId) at a time, and says how many it holds.",
      skills: [{ id: "notes", name: "Notes", description: "Keeps what you send as a note of the conversation.", tags: ["notes"] }],
    },
  },
  { type: "agui", label: "AG-UI", name: "Notes over AG-UI", settings: { name: "Notes" } },
];
const TENANT = "Agent protocols";

const configPath = process.env.CHANNELKIT_EXAMPLE_CONFIG ?? "./agent-protocols.json";
const plugins = [mcpChannels(), a2aChannels(), aguiChannels()];
const storage = openStorage(process.env.CHANNELKIT_DB ?? "./agent-protocols.db");

// Two instances started together on one database provision one by one (a lock file next to
// the config): the second finds the channels of the first, and their keys in the config file.
const { server, service, lines } = await underLock(`${configPath}.lock`, async () => {
  // The plugins' tables (A2A keeps its tasks in the plugin store) with channelkit's.
  await storage.migrate({ plugins });
  const service = await createChannelService({ storage, flows: [notes], plugins, secretKey: process.env.CHANNELKIT_SECRET_KEY });
  const server = await serve(service, { port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? "127.0.0.1" });
  return { server, service, lines: await provision(service, server.url) };
});
for (const line of lines) console.log(line);
console.log(`listening on ${server.url}`);

/**
 * The example's tenant and its three channels, bound to `notes`: created on the first start,
 * found by name on the next ones. A key is shown only when it is made: the first start writes
 * the keys to the config file, the next ones read them from it; a channel whose key the file
 * does not hold (the file deleted) gets a new one (its previous key revoked).
 */
async function provision(service, url) {
  const admin = service.admin.as("agent-protocols-example");
  const saved = await readConfig();
  const tenant = (await admin.listTenants()).tenants.find((candidate) => candidate.name === TENANT) ?? (await admin.createTenant({ name: TENANT })).tenant;
  const { channels } = await admin.listChannels({ tenantId: tenant.id });
  const config = { url, tenant: { id: tenant.id, name: tenant.name }, channels: {} };
  const lines = [];
  const done = { created: 0, found: 0, rekeyed: 0 };
  for (const wanted of CHANNELS) {
    const existing = channels.find((channel) => channel.name === wanted.name && channel.type === wanted.type && channel.state !== "archived");
    let id;
    let key;
    if (!existing) {
      const created = await admin.createChannel({ tenantId: tenant.id, flow: "notes", name: wanted.name, type: wanted.type, settings: wanted.settings });
      [id, key] = [created.channel.id, created.api_key];
      done.created++;
    } else if (saved?.channels?.[wanted.type]?.id === existing.id && saved.channels[wanted.type].key) {
      [id, key] = [existing.id, saved.channels[wanted.type].key];
      done.found++;
    } else {
      [id, key] = [existing.id, (await admin.rotateKey(existing.id)).api_key];
      done.rekeyed++;
    }
    const endpoint = `${url}/channels/${wanted.type}/${id}`;
    config.channels[wanted.type] = { id, endpoint, key };
    lines.push(`${wanted.label} (channel ${id}): ${endpoint} key ${key}`);
    if (wanted.type === "mcp") config.channels.mcp.tool = wanted.settings.tool_name;
    if (wanted.type === "a2a") {
      config.channels.a2a.card = `${endpoint}/.well-known/agent-card.json`;
      lines.push(`  its agent card: ${config.channels.a2a.card}`);
    }
  }
  const rekeyed = done.rekeyed === 0 ? "" : `, ${done.rekeyed} found and given a new key (${configPath} did not hold theirs; their previous keys are revoked)`;
  lines.unshift(`Tenant "${TENANT}" (${tenant.id}): ${done.created} channels created, ${done.found} found with their keys in ${configPath}${rekeyed}.`);
  // The keys are secrets: the file is readable by its owner only, and replaced whole.
  await writeFile(`${configPath}.tmp`, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  await rename(`${configPath}.tmp`, configPath);
  lines.push(`Endpoints and keys written to ${configPath}: npm run mcp, a2a or agui -w examples/agent-protocols reads them.`);
  return lines;
}

async function readConfig() {
  try {
    return JSON.parse(await readFile(configPath, "utf8"));
  } catch {
    return undefined;
  }
}

/** Runs `work` holding the lock file `path`; a lock older than 30 s was left by a start that died, and is taken over. */
async function underLock(path, work) {
  for (;;) {
    try {
      await writeFile(path, String(process.pid), { flag: "wx" });
      break;
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
      const since = await stat(path).then(
        (found) => Date.now() - found.mtimeMs,
        () => 0,
      );
      if (since > 30_000) await rm(path, { force: true });
      else await sleep(100);
    }
  }
  try {
    return await work();
  } finally {
    await rm(path, { force: true });
  }
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    const closed = server.close();
    await service.close();
    await closed;
    process.exit(0);
  });
}
