#!/usr/bin/env node
/*
 * `npm run pack:all [-- DIR]`: packs every package with `npm pack` into DIR (default
 * `./tarballs`), so that an app outside this repository can install them while they are not
 * on the npm registry, and prints the command that installs them. Run after `npm run build`
 * (the npm script does both): a tarball holds the package's `dist/`.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const out = resolve(process.cwd(), process.argv[2] ?? "tarballs");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

const packages = readdirSync(join(ROOT, "packages"))
  .map((name) => join(ROOT, "packages", name))
  .filter((dir) => existsSync(join(dir, "package.json")))
  .filter((dir) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).private !== true);

mkdirSync(out, { recursive: true });
/** Each package's tarball, by the package's name. */
const tarballs = new Map();
for (const dir of packages) {
  // A package packed without its build would install and then fail at its first import.
  if (!existsSync(join(dir, "dist"))) {
    console.error(`${relative(ROOT, dir)} has no dist/: run npm run build first (npm run pack:all does)`);
    process.exit(1);
  }
  const [info] = JSON.parse(
    execFileSync(npm, ["pack", "--json", "--pack-destination", out], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }),
  );
  tarballs.set(info.name, join(out, info.filename));
  console.log(`${info.name}@${info.version}: ${join(out, info.filename)}`);
}
/** `names` with every @channelkit package they depend on: its tarball must be installed too, the registry has none. */
function withDependencies(names) {
  const all = new Set(names);
  for (const name of all) {
    const manifest = JSON.parse(readFileSync(join(ROOT, "packages", name.replace("@channelkit/", ""), "package.json"), "utf8"));
    for (const dependency of Object.keys(manifest.dependencies ?? {})) if (tarballs.has(dependency)) all.add(dependency);
  }
  return [...all];
}
const example = withDependencies(["@channelkit/core", "@channelkit/kysely", "@channelkit/node", "@channelkit/cli"]);
console.log("\nIn your app, install the tarballs of the packages it uses and of the @channelkit packages they");
console.log("depend on, in one command (the registry has none of them yet), e.g. for a server and its command:");
console.log(`  npm install ${example.map((name) => tarballs.get(name)).join(" ")} better-sqlite3@12`);
