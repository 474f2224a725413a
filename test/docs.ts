/**
 * The fenced code blocks of the documentation, for the checks that run them as written
 * (test/docs-code.test.ts types the TypeScript, test/docs-sessions.test.ts runs the shell
 * sessions). The conventions a block's fence may carry are in docs/contributing.md.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The monorepo's root. */
export const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** One fenced block of a Markdown file. */
export interface DocBlock {
  /** The file, relative to the root (`docs/client.md`). */
  file: string;
  /** The 1-based line of its opening fence. */
  line: number;
  /** Its language, lowercased (`ts`, `sh`, `json`...), or "" when the fence names none. */
  lang: string;
  /** The words of the fence after the language (`partial`, `runnable`, `output`...). */
  flags: string[];
  /** Its text, the fence's own indentation removed, ending with a newline unless empty. */
  code: string;
}

/** The documentation a user follows: the root README, docs/ and the packages' and examples' READMEs. */
export function docFiles(): string[] {
  const docs = readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".md"))
    .map((name) => join("docs", name));
  const readmes = ["packages", "examples"].flatMap((dir) =>
    readdirSync(join(ROOT, dir), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => join(dir, entry.name, "README.md"))
      .filter((file) => {
        try {
          readFileSync(join(ROOT, file));
          return true;
        } catch {
          return false;
        }
      }),
  );
  return ["README.md", ...docs, ...readmes]
    .map((file) => file.split("\\").join("/"))
    .sort((a, b) => (a === "README.md" ? -1 : b === "README.md" ? 1 : a.localeCompare(b)));
}

/** The fenced blocks of one Markdown file (relative to the root), in order. */
export function docBlocks(file: string): DocBlock[] {
  return parseBlocks(file, readFileSync(join(ROOT, file), "utf8"));
}

/** The fenced blocks of Markdown text, named as coming from `file`. */
export function parseBlocks(file: string, markdown: string): DocBlock[] {
  const lines = markdown.split("\n");
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)(`{3,}|~{3,})\s*([^`\s]*)(.*)$/.exec(lines[i] as string);
    if (!open) continue;
    const [, indent = "", fence = "", lang = "", rest = ""] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j] as string;
      if (line.trim().startsWith(fence) && line.trim().replaceAll(fence[0] as string, "") === "") break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line.trimStart());
    }
    blocks.push({
      file,
      line: i + 1,
      lang: lang.toLowerCase(),
      flags: rest.trim().split(/\s+/).filter(Boolean),
      code: body.length === 0 ? "" : `${body.join("\n")}\n`,
    });
    i = j;
  }
  return blocks;
}

/** Where a block is, as an editor opens it: `docs/client.md:57`. */
export function where(block: Pick<DocBlock, "file" | "line">, offset = 0): string {
  return `${block.file}:${block.line + offset}`;
}
