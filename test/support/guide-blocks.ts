// The blocks of a markdown guide that a test runs: each fenced block right after an HTML
// comment `<!-- day-1-test: run NAME -->` (commands, run with sh) or `<!-- day-1-test: file
// PATH -->` (a file of the build context, written at PATH). The comment is invisible on the
// rendered page, so the reader sees the very text the test ran.

export interface GuideBlocks {
  /** NAME -> the commands of its block. */
  run: Map<string, string>;
  /** PATH (relative, in the build context) -> the file's text. */
  files: Map<string, string>;
}

const MARK = /^<!--\s*day-1-test:\s*(run|file)\s+(\S+)\s*-->\s*$/;

/** Every marked block of `markdown`; a mark without a fenced block right after it is an error. */
export function guideBlocks(markdown: string, file: string): GuideBlocks {
  const out: GuideBlocks = { run: new Map(), files: new Map() };
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = MARK.exec(lines[i]!);
    if (m === null) continue;
    const [, kind, name] = m as unknown as [string, "run" | "file", string];
    const fence = /^(```+)/.exec(lines[i + 1] ?? "");
    if (fence === null)
      throw new Error(`${file}:${i + 1}: "${lines[i]}" is not followed by a fenced block`);
    const end = lines.findIndex((l, j) => j > i + 1 && l.trimEnd() === fence[1]);
    if (end < 0) throw new Error(`${file}:${i + 2}: the block of "${name}" is never closed`);
    const text = `${lines.slice(i + 2, end).join("\n")}\n`;
    const into = kind === "run" ? out.run : out.files;
    if (into.has(name)) throw new Error(`${file}:${i + 1}: a second block marked ${kind} ${name}`);
    if (kind === "file" && (name.startsWith("/") || name.split("/").includes("..")))
      throw new Error(`${file}:${i + 1}: ${name} must be a path inside the build context`);
    into.set(name, text);
    i = end;
  }
  return out;
}

/** The block `name` of `kind`, or an error naming what the guide lacks. */
export function guideBlock(blocks: GuideBlocks, kind: "run" | "file", name: string): string {
  const text = (kind === "run" ? blocks.run : blocks.files).get(name);
  if (text === undefined)
    throw new Error(
      `docs/day-1.md has no block marked "<!-- day-1-test: ${kind} ${name} -->" (the test runs it)`,
    );
  return text;
}
