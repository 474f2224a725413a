import {
  adminToken,
  audit,
  channelCreate,
  channelList,
  channelRotateKey,
  channelRotateSigningSecret,
  channelShow,
  channelUpdate,
  conversationDelete,
  conversationExport,
  conversationList,
  endUserErase,
  secretsReseal,
  conversationSweep,
  type Io,
  migrate,
  serveCommand,
  tenantCreate,
  tenantList,
} from "./commands.js";
import { backupCommand } from "./backup.js";
import { unknownVariableWarnings } from "./env.js";
import { logLine, reportError, UsageError } from "./errors.js";
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
  "conversation delete": conversationDelete,
  "conversation list": conversationList,
  "conversation export": conversationExport,
  "end-user erase": endUserErase,
  "secrets reseal": secretsReseal,
  backup: backupCommand,
  "conversation sweep": conversationSweep,
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
  for (const warning of unknownVariableWarnings(io.env)) io.err(logLine(warning));
  const argv = args[0] === "--help" || args[0] === "-h" ? args : commandFirst(args);
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

/** True when the arguments run `serve`, wherever its options are: it keeps the process running. */
export function servesForever(args: string[]): boolean {
  return commandFirst(args)[0] === "serve";
}

/** The options every command takes, which may also come before the command's name. */
const GLOBAL_OPTIONS = new Set(["--db", "--config"]);

/** The first word of each command's name. */
const COMMAND_WORDS = new Set(Object.keys(COMMANDS).map((name) => name.split(" ")[0] as string));

/**
 * The arguments with the options before the command's name moved after it:
 * `channelkit --db x.db tenant list` is `channelkit tenant list --db x.db`, and
 * `channelkit --demo serve` is `channelkit serve --demo` (the command then checks them as its own).
 */
function commandFirst(args: string[]): string[] {
  let i = 0;
  while (i < args.length && (args[i] as string).startsWith("-")) {
    const arg = args[i] as string;
    i += 1;
    if (arg.includes("=")) continue;
    if (GLOBAL_OPTIONS.has(arg)) {
      if (i < args.length) i += 1;
      continue;
    }
    // Another option's value, unless the word names a command (`--demo serve`).
    if (i < args.length && !(args[i] as string).startsWith("-") && !COMMAND_WORDS.has(args[i] as string)) i += 1;
  }
  return i === 0 || i >= args.length ? args : [...args.slice(i), ...args.slice(0, i)];
}
