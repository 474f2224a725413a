import { isServiceError } from "@channelkit/core";
import {
  adminToken,
  audit,
  channelCreate,
  channelRotateKey,
  channelRotateSigningSecret,
  channelUpdate,
  type Io,
  migrate,
  serveCommand,
  tenantCreate,
} from "./commands.js";
import { errorLine, USAGE, UsageError } from "./usage.js";

const COMMANDS: Record<string, (args: string[], io: Io) => Promise<void>> = {
  serve: serveCommand,
  migrate,
  "tenant create": tenantCreate,
  "channel create": channelCreate,
  "channel update": channelUpdate,
  "channel rotate-key": channelRotateKey,
  "channel rotate-signing-secret": channelRotateSigningSecret,
  "admin-token": adminToken,
  audit,
};

/**
 * Runs the `channelkit` command and returns its exit code: 0 done, 1 refused (the error is
 * printed as the contract's envelope on stderr), 2 bad command line.
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
    if (error instanceof UsageError) {
      io.err(`${errorLine(error.message)}\n\n${USAGE}`);
      return 2;
    }
    if (isServiceError(error)) {
      io.err(JSON.stringify({ error: { code: error.code, message: error.message } }));
      return 1;
    }
    io.err(errorLine(error instanceof Error ? error.message : String(error)));
    return 1;
  }
}
