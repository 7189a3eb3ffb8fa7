// The agent as a package an OS image build drops in (docs/machine.md, "Installing the agent"):
// a tree laid out from the filesystem root, and the same tree as a tarball.
//   usr/bin/liken                         launcher: the distribution's node runs the bundle
//   usr/lib/liken/dist/cli/liken.mjs      the whole CLI in one file, npm dependencies inlined
//   usr/lib/liken/dist/cli/zstd.wasm      the zstd codec of release packs, read by the bundle
//   usr/lib/liken/build/Release/liken_native.node   the native addon (N-API, ABI-stable)
//   usr/lib/liken/package.json            name and version (`liken --version` reads it)
//   usr/lib/systemd/system/liken-agent.service
//   usr/share/doc/liken/agent.yaml.example          what /etc/liken/agent.yaml looks like
//   usr/share/doc/liken/agent.schema.json           its JSON Schema (the example's modeline names it)
// Node.js itself is not in the package: the image installs Debian's `nodejs` (>= 20.18.1). The
// bundle sits two levels under usr/lib/liken as src/cli/main.ts sits under the checkout, so
// its import.meta.url finds build/Release and package.json the same way.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Metafile } from "esbuild";
import { LikenError, type LikenErrorOptions } from "../src/errors.js";
import { nodeFetchRepair } from "../src/operator-image/bundle.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * The Node.js versions liken runs on: package.json's `engines` (20.18.1 is undici 7's
 * minimum; 21 is not a long-term release). The launcher refuses any other before loading the
 * bundle, so an old runtime is named instead of failing somewhere inside a dependency.
 */
export const NODE_ENGINES = ">=20.18.1 <21 || >=22";
const NODE_OK =
  'const [a, b, c] = process.versions.node.split(".").map(Number); ' +
  "a >= 22 || (a === 20 && (b > 18 || (b === 18 && c >= 1)))";
export const MIN_NODE_MAJOR = 20;

/** Where the package puts its parts, relative to the filesystem root. */
export const LAYOUT = {
  launcher: "usr/bin/liken",
  bundle: "usr/lib/liken/dist/cli/liken.mjs",
  wasm: "usr/lib/liken/dist/cli/zstd.wasm",
  addon: "usr/lib/liken/build/Release/liken_native.node",
  manifest: "usr/lib/liken/package.json",
  unit: "usr/lib/systemd/system/liken-agent.service",
  example: "usr/share/doc/liken/agent.yaml.example",
  schema: "usr/share/doc/liken/agent.schema.json",
} as const;

export interface PackageOptions {
  /** Directory to write into; `<out>/tree/` and `<out>/<name>.tar.gz` are replaced. */
  out: string;
  /** The checkout to package (default: this one). */
  root?: string;
}

export interface AgentPackage {
  /** The tree, laid out from the filesystem root. */
  tree: string;
  tarball: string;
  version: string;
  /** Bytes of each part, for the report and the docs. */
  sizes: Record<keyof typeof LAYOUT, number> & { tarball: number };
}

export type PackageCode =
  "LIKEN_PACKAGE_ADDON_MISSING" | "LIKEN_PACKAGE_BARE_IMPORT" | "LIKEN_PACKAGE_CODEC_MISSING";

export class PackageError extends LikenError {
  declare readonly code: PackageCode;
  constructor(code: PackageCode, message: string, opts: LikenErrorOptions = {}) {
    super(code, message, opts);
  }
}

/** The launcher: relocatable (it finds the bundle next to itself), and it checks node first. */
export function launcherScript(): string {
  return `#!/bin/sh
# liken, from the liken-agent package (docs/machine.md). The distribution's Node.js runs the
# bundled CLI; LIKEN_NODE names another node binary. LIKEN_NODE_FLAGS (the agent's unit sets
# them) go on node's command line, where V8 flags that NODE_OPTIONS refuses are taken.
node="\${LIKEN_NODE:-node}"
here=$(dirname "$(readlink -f "$0")")
bundle="$here/../lib/liken/dist/cli/liken.mjs"
verdict=$("$node" -p '${NODE_OK} ? "ok" : "v" + process.versions.node' 2>/dev/null) || {
  echo "liken: no Node.js found ($node); install Debian's nodejs package (${NODE_ENGINES}) or set LIKEN_NODE" >&2
  exit 127
}
if [ "$verdict" != ok ]; then
  echo "liken: Node.js $verdict is not supported; liken needs ${NODE_ENGINES} (Debian 13's nodejs, or NodeSource's)" >&2
  exit 1
fi
# shellcheck disable=SC2086 # the flags are words
exec "$node" \${LIKEN_NODE_FLAGS:-} "$bundle" "$@"
`;
}

const BUILTINS = new Set(builtinModules);

/** Every import the bundle leaves must be Node's own: the machine has no node_modules. */
export function bareImports(meta: Metafile): string[] {
  const out = new Set<string>();
  for (const o of Object.values(meta.outputs))
    for (const i of o.imports)
      if (i.external && !i.path.startsWith("node:") && !BUILTINS.has(i.path)) out.add(i.path);
  return [...out].sort();
}

/**
 * Left as imports on purpose: esbuild is reached only by the lab's useCliBundle(), never on a
 * machine; bufferutil and utf-8-validate are ws's optional speedups, which it require()s inside
 * a try and does without.
 */
const ABSENT_ON_MACHINE = ["esbuild", "bufferutil", "utf-8-validate"];

/** The zstd codec's CommonJS entry, as the bundle's inputs name it. */
const ZSTD_ENTRY =
  /(^|[\\/])node_modules[\\/]@bokuweb[\\/]zstd-wasm[\\/]dist[\\/]common[\\/]index\.node\.js$/;

/**
 * The zstd.wasm of the codec the bundle inlined (src/verify/zstd.ts), to ship beside it: the
 * one next to the entry esbuild read, so the bytes always match the glue code.
 */
export function zstdWasmOf(meta: Metafile, root: string): string {
  const entry = Object.keys(meta.inputs).find((i) => ZSTD_ENTRY.test(i));
  if (entry === undefined)
    throw new PackageError(
      "LIKEN_PACKAGE_CODEC_MISSING",
      "the bundle does not inline @bokuweb/zstd-wasm, so a machine could not decode release packs; import it statically (src/verify/zstd.ts) and package again",
    );
  return path.join(path.resolve(root, path.dirname(entry)), "zstd.wasm");
}

async function bundleCli(root: string, outfile: string): Promise<Metafile> {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [path.join(root, "src", "cli", "main.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: `node${MIN_NODE_MAJOR}`,
    external: ABSENT_ON_MACHINE,
    outfile,
    metafile: true,
    // The metafile's inputs are then relative to the checkout (zstdWasmOf).
    absWorkingDir: root,
    legalComments: "eof",
    logLevel: "error",
    // The CommonJS dependencies inlined into an ES module call require() for Node's modules,
    // and the zstd codec reads zstd.wasm from its `__dirname`, which an ES module lacks. In
    // the bundle every inlined file's directory is the bundle's, so `__dirname` is that, and
    // the wasm is shipped there (LAYOUT.wasm): the codec loads as its package wrote it. Chosen
    // over patching the codec's source (one more pattern to keep matching, like node-fetch's)
    // and over inlining the wasm as base64 (a third bigger, and still a patch of its init()).
    // `define` touches only a free `__dirname`, never a module's own; pino's worker lookups,
    // which liken never reaches (no transports), name the bundle's directory too.
    banner: {
      js: [
        'import { createRequire as __likenRequire } from "node:module";',
        'import { dirname as __likenDirnameOf } from "node:path";',
        'import { fileURLToPath as __likenPathOf } from "node:url";',
        "const require = __likenRequire(import.meta.url);",
        "const __likenDirname = __likenDirnameOf(__likenPathOf(import.meta.url));",
      ].join(" "),
    },
    define: { __dirname: "__likenDirname" },
    // Machines run Debian's nodejs, whose CVE-2026-48931 backport trips node-fetch's
    // premature-close check on every kept-alive answer: the same repair as the operator image's
    // (src/operator-image/bundle.ts; docs/adr/node-fetch-premature-close.md).
    plugins: [nodeFetchRepair],
  });
  const bare = bareImports(result.metafile).filter((p) => !ABSENT_ON_MACHINE.includes(p));
  if (bare.length > 0)
    throw new PackageError(
      "LIKEN_PACKAGE_BARE_IMPORT",
      `the bundle still imports ${bare.join(", ")}, which a machine does not have; inline them (remove them from external) or drop the import`,
      { context: { imports: bare } },
    );
  return result.metafile;
}

function copy(from: string, to: string, mode: number): void {
  mkdirSync(path.dirname(to), { recursive: true });
  copyFileSync(from, to);
  chmodSync(to, mode);
}

/** Builds the tree and the tarball; returns where they are and how big each part is. */
export async function packageAgent(opts: PackageOptions): Promise<AgentPackage> {
  const root = opts.root ?? ROOT;
  const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    version: string;
    license: string;
  };
  const addon = path.join(root, "build", "Release", "liken_native.node");
  try {
    statSync(addon);
  } catch {
    throw new PackageError(
      "LIKEN_PACKAGE_ADDON_MISSING",
      `the native addon ${addon} is missing; run \`npm ci\` (it builds it) and package again`,
      { context: { addon } },
    );
  }
  const tree = path.join(opts.out, "tree");
  rmSync(tree, { recursive: true, force: true });
  const at = (p: string): string => path.join(tree, p);

  const meta = await bundleCli(root, at(LAYOUT.bundle));
  chmodSync(at(LAYOUT.bundle), 0o644);
  copy(zstdWasmOf(meta, root), at(LAYOUT.wasm), 0o644);
  copy(addon, at(LAYOUT.addon), 0o755);
  copy(path.join(root, "config", "systemd", "liken-agent.service"), at(LAYOUT.unit), 0o644);
  copy(path.join(root, "testbed", "agent.yaml.example"), at(LAYOUT.example), 0o644);
  copy(path.join(root, "config", "schema", "agent.schema.json"), at(LAYOUT.schema), 0o644);
  writeText(
    at(LAYOUT.manifest),
    JSON.stringify(
      { name: "liken", version: pkg.version, license: pkg.license, type: "module" },
      null,
      2,
    ) + "\n",
    0o644,
  );
  writeText(at(LAYOUT.launcher), launcherScript(), 0o755);

  const tarball = path.join(opts.out, `liken-agent-${pkg.version}-linux-${process.arch}.tar.gz`);
  rmSync(tarball, { force: true });
  // GNU tar, root-owned files in a fixed order. Files only, no directory entries: the image
  // build unpacks it with `tar -xzf ... -C <rootfs>` as root, which would give the rootfs's
  // own /usr and /usr/lib the mode and time of this tree's directories.
  execFileSync("tar", [
    "--create",
    "--gzip",
    "--file",
    tarball,
    "--owner=0",
    "--group=0",
    "--numeric-owner",
    "--directory",
    tree,
    ...Object.values(LAYOUT).sort(),
  ]);

  const sizes = Object.fromEntries(
    Object.entries(LAYOUT).map(([k, p]) => [k, statSync(at(p)).size]),
  ) as AgentPackage["sizes"];
  sizes.tarball = statSync(tarball).size;
  return { tree, tarball, version: pkg.version, sizes };
}

function writeText(file: string, text: string, mode: number): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  chmodSync(file, mode);
}
