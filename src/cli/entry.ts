// How liken starts liken: the agent's download child, the lab's machines and operators, the
// tests' fleets. From a built tree or an installed package that is bin/liken.js, which runs
// dist/. From a source checkout bin/liken.js compiles TypeScript through tsx in every process
// (seconds of CPU each), so the lab and the test setup build one bundle of the CLI first and
// name it in LIKEN_ENTRY, which every process they start inherits.
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository (or package) root: src/cli/ and .lab/cli/ both sit two levels down. */
const ROOT = path.resolve(here, "..", "..");

export const ENTRY_ENV = "LIKEN_ENTRY";
/**
 * Two levels under the root, like src/cli/, so the bundle finds build/Release and config/.
 * Not under build/: node-gyp owns that directory and deletes it on every rebuild.
 */
export const CLI_BUNDLE = path.join(ROOT, ".lab", "cli", "liken.mjs");

/**
 * The script to run with process.execPath to start a liken command. The agent package
 * (testbed/package-agent.ts) ships the CLI as one bundle and no bin/liken.js: there the bundle
 * is its own entry (without this, the agent's download child on a machine found no script).
 */
export function likenEntry(): string {
  const set = process.env[ENTRY_ENV];
  if (set !== undefined) return set;
  const bin = path.join(ROOT, "bin", "liken.js");
  const self = fileURLToPath(import.meta.url);
  return !existsSync(bin) && self.endsWith(".mjs") ? self : bin;
}

/**
 * Bundles src/cli/main.ts into CLI_BUNDLE and its chunks (esbuild, dependencies left as
 * imports, about a second), points LIKEN_ENTRY at it for this process and its children, and returns its path.
 * Only from a source checkout: a built tree already runs compiled JavaScript.
 */
export async function useCliBundle(): Promise<string> {
  const source = path.join(ROOT, "src", "cli", "main.ts");
  if (!existsSync(source)) return likenEntry();
  // Split: what the CLI imports dynamically (the agent's lean entry, the full CLI, the drain
  // the agent loads on a turn) becomes a chunk of its own beside the bundle, so a process
  // loads only the chunks it runs; one file would load every dependency at start-up.
  await bundleModule(source, CLI_BUNDLE, { splitting: true });
  process.env[ENTRY_ENV] = CLI_BUNDLE;
  return CLI_BUNDLE;
}

/**
 * One ESM file for Node 20 from a TypeScript entry point, its npm dependencies left as imports
 * (they resolve from node_modules as they would for the source). The output must sit as deep
 * under the root as its source does: modules find the root through import.meta.url.
 * `overrides` change esbuild's options (the operator image bundles its dependencies too).
 */
export async function bundleModule(
  entryPoint: string,
  outfile: string,
  opts: { splitting?: boolean; overrides?: import("esbuild").BuildOptions } = {},
): Promise<void> {
  const { build } = await import("esbuild");
  const common = {
    entryPoints: [entryPoint] as string[],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    logLevel: "error",
    ...opts.overrides,
  } as const;
  if (opts.splitting !== true) {
    await build({ ...common, outfile });
    return;
  }
  // Chunks sit beside the entry (same depth, for import.meta.url) and are named by content
  // hash: a process started from an earlier bundle still finds the chunks it imports later.
  const ext = path.extname(outfile);
  await build({
    ...common,
    splitting: true,
    outdir: path.dirname(outfile),
    entryNames: path.basename(outfile, ext),
    chunkNames: "chunk-[hash]",
    outExtension: { ".js": ext },
  });
}
