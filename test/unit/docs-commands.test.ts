// The docs show commands that exist: every `liken ...` line of a fenced `sh` block in README.md
// and docs/ parses against the CLI's own commander definition (the commands, their options,
// their arguments), with nothing run. A renamed flag or command fails here, not in a reader's
// terminal (issue 42, item 11).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { registerCommands } from "../../src/cli/commands/index.js";
import { makeProgram } from "../../src/cli/program.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

function markdownFiles(): string[] {
  const docs = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? docs(path.join(dir, e.name))
        : e.name.endsWith(".md")
          ? [path.join(dir, e.name)]
          : [],
    );
  return [path.join(ROOT, "README.md"), ...docs(path.join(ROOT, "docs"))];
}

export interface DocCommand {
  file: string;
  line: number;
  text: string;
}

/**
 * The `liken` commands of a markdown text's ```sh blocks: continuation lines joined, comments
 * and heredoc bodies left out, each cut at the first pipe, `&&`, `;` or redirection.
 */
export function likenCommands(markdown: string, file: string): DocCommand[] {
  const out: DocCommand[] = [];
  const lines = markdown.split("\n");
  let inSh = false;
  let heredoc: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    if (/^\s*```/.test(raw)) {
      inSh = !inSh && /^\s*```(sh|bash|shell)\s*$/.test(raw);
      continue;
    }
    if (!inSh) continue;
    if (heredoc !== undefined) {
      if (raw.trim() === heredoc) heredoc = undefined;
      continue;
    }
    const start = i;
    let text = raw;
    while (text.trimEnd().endsWith("\\") && i + 1 < lines.length) {
      text = `${text.trimEnd().slice(0, -1)} ${lines[++i]!.trim()}`;
    }
    const here = /<<-?\s*'?"?(\w+)'?"?/.exec(text);
    if (here) heredoc = here[1];
    const command = text
      .replace(/(^|\s)#.*$/, "")
      .replace(/\s+/g, " ")
      .split(/\s(?:\||&&|;|>|2>)\s/)[0]!
      .replace(/^\s*\$\s+/, "")
      .trim();
    if (/^liken(\s|$)/.test(command)) out.push({ file, line: start + 1, text: command });
  }
  return out;
}

/** What a placeholder (`<url>`, `$VAR`) becomes: its value is the reader's, not checked. */
const PLACEHOLDER = "@placeholder@";

/** Shell words: quotes kept together, `[--flag x]` (doc notation for optional) unwrapped. */
function words(command: string): string[] {
  const out: string[] = [];
  for (const m of command.matchAll(/<[^>]*>|"([^"]*)"|'([^']*)'|(\S+)/g)) {
    if (m[0].startsWith("<") || /^"?\$/.test(m[0])) {
      out.push(PLACEHOLDER);
      continue;
    }
    const w = m[1] ?? m[2] ?? m[3]!;
    const bare = m[3] !== undefined ? w.replace(/^\[/, "").replace(/\]$/, "") : w;
    out.push(/^\$/.test(bare) ? PLACEHOLDER : bare);
  }
  return out;
}

/** Every command of the program made to run nothing: only parsing is checked. */
function inert(cmd: Command): void {
  for (const c of cmd.commands) {
    c.action(() => undefined);
    inert(c);
  }
}

/** The commander error a command line gets, or undefined when it parses. */
async function parseError(command: string): Promise<string | undefined> {
  const program = makeProgram(registerCommands);
  inert(program);
  program.configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
  try {
    await program.parseAsync(words(command).slice(1), { from: "user" });
    return undefined;
  } catch (e) {
    const message = (e as Error).message;
    // A value a parser refused is fine when it is a placeholder: the structure parsed.
    return message.includes(PLACEHOLDER) ? undefined : message;
  }
}

describe("the docs' liken commands", () => {
  it("finds commands in sh blocks, joins continuations, skips heredocs and comments", () => {
    const md = [
      "```sh",
      "liken status lab   # a comment",
      "liken release build --version 1 \\",
      "  --out site -a rootfs=x.img",
      "cat > x <<'EOF'",
      "liken not-a-command",
      "EOF",
      "liken status lab | less",
      "```",
      "```",
      "liken in-a-plain-block",
      "```",
    ].join("\n");
    expect(likenCommands(md, "x.md").map((c) => c.text)).toEqual([
      "liken status lab",
      "liken release build --version 1 --out site -a rootfs=x.img",
      "liken status lab",
    ]);
  });

  it("the old name of `liken release sign` still parses, as an alias (issue 42, item 12)", async () => {
    expect(await parseError("liken release channel init --repo site --keys keys")).toBeUndefined();
    expect(await parseError("liken release sign init --repo site --keys keys")).toBeUndefined();
  });

  it("every one parses against the CLI's own definition", async () => {
    const commands = markdownFiles().flatMap((f) =>
      likenCommands(readFileSync(f, "utf8"), path.relative(ROOT, f)),
    );
    expect(commands.length).toBeGreaterThan(10);
    const problems: string[] = [];
    for (const c of commands) {
      const e = await parseError(c.text);
      if (e !== undefined) problems.push(`${c.file}:${c.line}: ${c.text}\n  ${e}`);
    }
    expect(problems, problems.join("\n")).toEqual([]);
  });
});
