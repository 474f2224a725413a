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
export async function main(args: string[], io: Io): Promise<number> {
  const argv = commandFirst(args);
  if (argv.length === 0 || argv[0] === "--help" || argv[0] === "-h" || argv[0] === "help") {
    (argv.length === 0 ? io.err : io.out)(USAGE);
    return argv.length === 0 ? 2 : 0;
  }
  const two = `${argv[0]} ${argv[1] ?? ""}`;
  const [name, rest] = COMMANDS[two] ? [two, argv.slice(2)] : [argv[0] as string, argv.slice(1)];
  const command = COMMANDS[name];
  try {
    if (!command) {
      // The words that name a command: an option after the first is not one of them.
      const words = argv[1]?.startsWith("-") ? argv.slice(0, 1) : argv.slice(0, 2);
      throw new UsageError(`Unknown command: ${words.join(" ")}`);
    }
    await command(rest, io);
    return 0;
  } catch (error) {
    return reportError(io.err, error);
  }
}

/** The options every command takes, which may also come before the command's name. */
const GLOBAL_OPTIONS = new Set(["--db", "--config"]);

/**
 * The arguments with the options every command takes (`--db`, `--config`) moved from before
 * the command's name to after it: `channelkit --db x.db tenant list` is
 * `channelkit tenant list --db x.db`.
 */
function commandFirst(args: string[]): string[] {
  const leading: string[] = [];
  let i = 0;
  while (i < args.length) {
    const arg = args[i] as string;
    const name = arg.split("=", 1)[0] as string;
    if (!GLOBAL_OPTIONS.has(name)) break;
    const takesNext = !arg.includes("=") && i + 1 < args.length;
    leading.push(...args.slice(i, takesNext ? i + 2 : i + 1));
    i += takesNext ? 2 : 1;
  }
  return leading.length === 0 ? args : [...args.slice(i), ...leading];
}
