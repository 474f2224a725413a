import {
  adminToken,
  audit,
  channelCreate,
  channelList,
  channelRotateKey,
  channelRotateSigningSecret,
  channelShow,
  channelUpdate,
  type Io,
  migrate,
  serveCommand,
  tenantCreate,
  tenantList,
} from "./commands.js";
import { reportError, UsageError } from "./errors.js";
import { USAGE } from "./usage.js";

const COMMANDS: Record<string, (args: string[], io: Io) => Promise<void>> = {
  serve: serveCommand,
  migrate,
  "tenant create": tenantCreate,
  "tenant list": tenantList,
  "channel create": channelCreate,
  "channel list": channelList,
  "channel show": channelShow,
  "channel update": channelUpdate,
  "channel rotate-key": channelRotateKey,
  "channel rotate-signing-secret": channelRotateSigningSecret,
  "admin-token": adminToken,
  audit,
};

/**
 * Runs the `channelkit` command and returns its exit code: 0 done, 1 refused, 2 bad command
 * line. Whatever a command throws is printed here, and only here, as the error envelope
 * `{"error":{"code","message"}}` on one line of stderr (followed by the usage for a bad
 * command line).
 */
export async function main(argv: string[], io: Io): Promise<number> {
  if (argv.length === 0 || argv[0] === "--help" || argv[0] === "-h" || argv[0] === "help") {
    (argv.length === 0 ? io.err : io.out)(USAGE);
    return argv.length === 0 ? 2 : 0;
  }
  const two = `${argv[0]} ${argv[1] ?? ""}`;
  const [name, rest] = COMMANDS[two] ? [two, argv.slice(2)] : [argv[0] as string, argv.slice(1)];
  const command = COMMANDS[name];
  try {
    if (!command) throw new UsageError(`Unknown command: ${argv.slice(0, 2).join(" ")}`);
    await command(rest, io);
    return 0;
  } catch (error) {
    return reportError(io.err, error);
  }
}
