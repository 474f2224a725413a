#!/usr/bin/env node
import { main, servesForever } from "./main.js";

const code = await main(process.argv.slice(2), {
  env: process.env,
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
});
// `serve` keeps running on its open server; every other command ends here, once its output
// is written, even when a config's storage or plugins left something open (a pool, a timer).
if (code !== 0 || !servesForever(process.argv.slice(2))) {
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise((resolve) => stream.write("", resolve))));
  process.exit(code);
}
