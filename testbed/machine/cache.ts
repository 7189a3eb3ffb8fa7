// The machine build's cache: each stage (base root filesystem, slot images, disk per
// bootloader) is a directory `~/.cache/liken/testbed/machine-<stage>-<hash>` named by a hash of
// everything it is made from, built under a temporary name and renamed into place when done, so
// a directory that exists is complete and a second build only reads it.
import { execFileSync } from "node:child_process";
import { createHash, type Hash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { alive, cacheRoot } from "../build.js";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const MiB = 1024 * 1024;

/** Runs a tool, returning its stdout; its stderr goes into the error when it fails. */
export function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; input?: Buffer; env?: NodeJS.ProcessEnv } = {},
): string {
  return execFileSync(cmd, args, {
    cwd: opts.cwd,
    input: opts.input,
    env: opts.env,
    encoding: "latin1",
    stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    maxBuffer: 64 * MiB,
  });
}

export function dpkgVersion(pkg: string): string {
  return run("dpkg-query", ["-W", "-f=${Version}", pkg]);
}

/** Adds files of this checkout (relative paths), each with its name, to a hash. */
export function hashFiles(h: Hash, files: readonly string[]): Hash {
  for (const f of files)
    h.update(f)
      .update("\0")
      .update(readFileSync(join(ROOT, f)));
  return h;
}

/** Every file under `dir` of this checkout, recursively, sorted (for hashing a source tree). */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(relative(ROOT, p));
    }
  };
  walk(join(ROOT, dir));
  return out.sort();
}

export function newHash(stage: string): Hash {
  return createHash("sha256").update(`liken-machine-${stage}\0`);
}

export function short(h: Hash): string {
  return h.digest("hex").slice(0, 16);
}

/** Stages being built by this process: a second caller waits for the first build. */
const building = new Map<string, Promise<{ dir: string; built: boolean }>>();

/**
 * The cached stage `machine-<stage>-<hash>`: built by `build(work)` when absent. Earlier
 * hashes of the same stage untouched for an hour, and work directories of dead builds, go.
 */
export function cachedStage(
  stage: string,
  hash: string,
  build: (work: string) => void | Promise<void>,
): Promise<{ dir: string; built: boolean }> {
  const name = `machine-${stage}-${hash}`;
  const pending = building.get(name);
  if (pending !== undefined) return pending.then((r) => ({ dir: r.dir, built: false }));
  const p = buildStage(stage, name, build).finally(() => building.delete(name));
  building.set(name, p);
  return p;
}

async function buildStage(
  stage: string,
  name: string,
  build: (work: string) => void | Promise<void>,
): Promise<{ dir: string; built: boolean }> {
  const root = cacheRoot();
  const dir = join(root, name);
  if (existsSync(dir)) return { dir, built: false };
  mkdirSync(root, { recursive: true });
  const work = `${dir}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    await build(work);
  } catch (e) {
    rmSync(work, { recursive: true, force: true });
    throw e;
  }
  try {
    renameSync(work, dir);
  } catch (e) {
    // Another process finished the same stage first: its result is as good as ours.
    rmSync(work, { recursive: true, force: true });
    if (!existsSync(dir)) throw e;
    return { dir, built: false };
  }
  prune(stage, name);
  return { dir, built: true };
}

function prune(stage: string, keep: string): void {
  const root = cacheRoot();
  const mine = new RegExp(`^machine-${stage}-[0-9a-f]{16}(\\.tmp-(\\d+))?$`);
  for (const d of readdirSync(root)) {
    const m = mine.exec(d);
    if (m === null || d === keep) continue;
    const p = join(root, d);
    const tmpPid = m[2];
    const stale =
      tmpPid !== undefined ? !alive(Number(tmpPid)) : Date.now() - statSync(p).mtimeMs > 3600_000;
    if (stale) rmSync(p, { recursive: true, force: true });
  }
}
