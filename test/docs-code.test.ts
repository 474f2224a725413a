/**
 * Every TypeScript (and JavaScript) block of the documentation, type-checked against the
 * packages' sources as a user would paste it: README.md, docs/**, packages/* and examples/*
 * READMEs. The conventions (what `partial` and `continues` mean, the names a block may use
 * without declaring them) are in docs/contributing.md.
 *
 * The blocks are written to a temporary directory inside the repository (test/.docs-code/, so
 * that `@channelkit/*` resolve through the root tsconfig's `paths` and the other packages
 * through node_modules) and checked in one program with the repository's compiler options.
 * A failure names the Markdown file and line of the diagnostic.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DocBlock, docBlocks, docFiles, parseBlocks, ROOT, where } from "./docs.js";

/** The languages checked, and the extension their file gets. */
const EXTENSIONS: Record<string, string> = { ts: ".ts", typescript: ".ts", tsx: ".tsx", js: ".mjs", javascript: ".mjs", mjs: ".mjs", jsx: ".jsx" };

/**
 * The names a block may use without declaring them: what the page's reader already has (the
 * service, its storage and flows, a client, ids) or writes themselves (their model, their flow).
 * A block that declares one of them itself shadows it.
 */
const GIVENS = `
import type { ChannelService, Flow } from "@channelkit/core";
import type { ChannelkitClient } from "@channelkit/client";
import type { KyselyStorage } from "@channelkit/kysely";
import type { LanguageModel, Tool, UIMessageChunk } from "ai";

declare global {
  /** The host's service, made by createChannelService. */
  const service: ChannelService;
  /** The service's storage (sqlite(), postgres()). */
  const storage: KyselyStorage;
  /** The host's flows, and one of them. */
  const flows: Flow[];
  const myFlow: Flow;
  /** A client made by createClient, the service's origin, a channel's key and signing secret. */
  const client: ChannelkitClient;
  const baseUrl: string;
  const apiKey: string;
  const signingSecret: string;
  /** Ids the reader got from an earlier call. */
  const tenantId: string;
  const channelId: string;
  const conversationId: string;
  const chatId: string;
  /** The reader's own model client: the tokens of an answer. */
  const myModel: { stream(input: unknown, options?: { history?: unknown; signal?: AbortSignal }): AsyncIterable<string> };
  /** An AI SDK model (openai("gpt-4.1-mini"), ...) and a tool of the reader's. */
  const model: LanguageModel;
  const lookupOrder: Tool;
  /** An agent of another framework that speaks the AI SDK's UI message stream. */
  const myAgent: { stream(input: unknown, options?: { signal?: AbortSignal }): { toUIMessageStream(): ReadableStream<UIMessageChunk> } };
  /** A Redis client (ioredis, node-redis). */
  const redis: unknown;
}
export {};
`;
/** What a code block's fence may say after its language. */
const FLAGS = new Set(["partial", "continues"]);

/** One file of the program: the blocks it holds and where each of its lines comes from. */
interface CheckedFile {
  path: string;
  text: string;
  /** For each line of the file (0-based), the block and the line in it (0-based). */
  origin: { block: DocBlock; line: number }[];
}

/** The file name a block gives itself on its first line (`// channelkit.config.ts`), if any. */
function ownName(block: DocBlock): string | null {
  const match = /^\/\/\s*([\w.-]+\.(?:ts|tsx|mts|js|mjs|jsx))\b(?::|\s|$)/.exec(block.code);
  return match ? (match[1] as string) : null;
}

/** What one page gives the program: its files, its blocks checked and skipped, and the mistakes in its fences. */
interface Collected {
  files: CheckedFile[];
  checked: DocBlock[];
  skipped: DocBlock[];
  errors: string[];
}

/**
 * The files of one page: each block its own module in the page's directory (named by its
 * first line's `// name.ts` when it has one, so that a block may import another as the page
 * says), a `continues` block appended to the one before it.
 */
function collect(dir: string, page: string, blocks: DocBlock[]): Collected {
  const result: Collected = { files: [], checked: [], skipped: [], errors: [] };
  const pageDir = join(dir, page.replace(/\.md$/, ""));
  let previous: CheckedFile | null = null;
  const names = new Set<string>();
  for (const block of blocks) {
    const extension = EXTENSIONS[block.lang];
    if (!extension) continue;
    const unknown = block.flags.filter((flag) => !FLAGS.has(flag));
    if (unknown.length > 0) result.errors.push(`${where(block)}: unknown fence word ${unknown.join(", ")} (a code block takes ${[...FLAGS].join(", ")})`);
    if (block.flags.includes("partial")) {
      result.skipped.push(block);
      continue;
    }
    result.checked.push(block);
    const lines = block.code.replace(/\n$/, "").split("\n");
    const origin = lines.map((_, line) => ({ block, line }));
    if (block.flags.includes("continues")) {
      if (previous) {
        previous.text += `${lines.join("\n")}\n`;
        previous.origin.push(...origin);
        continue;
      }
      result.errors.push(`${where(block)}: a \`continues\` block follows no checked block`);
    }
    let name = ownName(block);
    if (!name || names.has(name)) name = `L${block.line}${extension}`;
    names.add(name);
    previous = { path: join(pageDir, name), text: `${lines.join("\n")}\n`, origin };
    result.files.push(previous);
  }
  return result;
}

/** The root tsconfig's options, for a program over the blocks (JSX and JavaScript allowed). */
function compilerOptions(): ts.CompilerOptions {
  const configPath = join(ROOT, "tsconfig.json");
  const read = ts.readConfigFile(configPath, (path) => ts.sys.readFile(path));
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, ROOT, undefined, configPath);
  const src = (pkg: string, entry = "index") => [`./packages/${pkg}/src/${entry}.ts`];
  return {
    ...parsed.options,
    noEmit: true,
    declaration: false,
    allowJs: true,
    checkJs: true,
    jsx: ts.JsxEmit.ReactJSX,
    // The packages the root tsconfig does not map (nothing in the repository's own sources imports them).
    paths: {
      ...parsed.options.paths,
      "@channelkit/cli": src("cli"),
      "@channelkit/widget": src("widget"),
      "@channelkit/widget/plugin": src("widget", "plugin"),
    },
  };
}

/** `docs/client.md:59:7: error TS2304: Cannot find name 'x'.` for a diagnostic in a block. */
function describeDiagnostic(diagnostic: ts.Diagnostic, files: Map<string, CheckedFile>): string {
  const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n  ");
  const file = diagnostic.file && files.get(ts.sys.resolvePath(diagnostic.file.fileName));
  if (!file || !diagnostic.file || diagnostic.start === undefined) return `${diagnostic.file?.fileName ?? "(program)"}: error TS${diagnostic.code}: ${message}`;
  const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
  const origin = file.origin[line];
  if (!origin) return `${file.path}:${line + 1}: error TS${diagnostic.code}: ${message}`;
  // The block's first line is the one after its fence.
  return `${where(origin.block, origin.line + 1)}:${character + 1}: error TS${diagnostic.code}: ${message}`;
}

/**
 * Type-checks pages in one program and answers, per page, its blocks and its errors (the
 * fences' mistakes, then the compiler's diagnostics, each at its Markdown file and line).
 */
function check(dir: string, pages: { file: string; blocks: DocBlock[] }[]): Map<string, Collected> {
  const collected = new Map(pages.map((page) => [page.file, collect(dir, page.file, page.blocks)]));
  const files = [...collected.values()].flatMap((page) => page.files);
  const givens = join(dir, "givens.d.ts");
  mkdirSync(dir, { recursive: true });
  writeFileSync(givens, GIVENS);
  for (const file of files) {
    mkdirSync(dirname(file.path), { recursive: true });
    // A module even without an import (isolatedModules; top-level await).
    writeFileSync(file.path, `${file.text}export {};\n`);
  }
  const program = ts.createProgram({ rootNames: [givens, ...files.map((file) => file.path)], options: compilerOptions() });
  const byPath = new Map(files.map((file) => [ts.sys.resolvePath(file.path), file]));
  const global = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
  const givensFile = program.getSourceFile(givens);
  if (givensFile) global.push(...program.getSemanticDiagnostics(givensFile));
  if (global.length > 0) throw new Error(global.map((diagnostic) => describeDiagnostic(diagnostic, byPath)).join("\n"));
  for (const page of collected.values()) {
    for (const file of page.files) {
      const source = program.getSourceFile(file.path);
      if (!source) throw new Error(`${file.path} is not in the program`);
      const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
      page.errors.push(...diagnostics.map((diagnostic) => describeDiagnostic(diagnostic, byPath)));
    }
  }
  return collected;
}

/** A page of this test's own, to show that a drift fails and names its line. */
const SELF_CHECK = `# Self-check

\`\`\`ts
import { createChannelService } from "@channelkit/core";
const service = await createChannelService({ storage, flows, noSuchOption: true });
\`\`\`

\`\`\`ts partial
this is not TypeScript …
\`\`\`

\`\`\`ts continues
const n: number = service.handler;
\`\`\`

\`\`\`ts partail
\`\`\`
`;

describe("the documentation's code blocks", () => {
  const dir = join(ROOT, "test", ".docs-code", randomUUID());
  let results = new Map<string, Collected>();
  beforeAll(() => {
    const pages = docFiles().map((file) => ({ file, blocks: docBlocks(file) }));
    results = check(dir, [...pages, { file: "self-check.md", blocks: parseBlocks("self-check.md", SELF_CHECK) }]);
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("type-check against the packages as written (a `partial` block aside)", () => {
    const pages = [...results].filter(([file]) => file !== "self-check.md").map(([, page]) => page);
    const checked = pages.reduce((sum, page) => sum + page.checked.length, 0);
    const skipped = pages.reduce((sum, page) => sum + page.skipped.length, 0);
    console.log(`docs code: ${checked} blocks type-checked in ${pages.length} pages, ${skipped} partial blocks skipped`);
    expect(checked).toBeGreaterThan(50);
    const errors = pages.flatMap((page) => page.errors);
    expect(errors, errors.join("\n")).toEqual([]);
  });

  it("a block that drifts from the packages fails, named by its file and line; a partial one is skipped; a fence's typo is refused", () => {
    const page = results.get("self-check.md") as Collected;
    expect(page.checked.map((block) => block.line)).toEqual([3, 12, 16]);
    expect(page.skipped.map((block) => block.line)).toEqual([8]);
    expect(page.errors).toEqual([
      "self-check.md:16: unknown fence word partail (a code block takes partial, continues)",
      expect.stringMatching(/^self-check\.md:5:62: error TS2353: Object literal may only specify known properties, and 'noSuchOption' does not exist/),
      expect.stringMatching(/^self-check\.md:13:7: error TS2322: Type '.*' is not assignable to type 'number'\./),
    ]);
  });
});
