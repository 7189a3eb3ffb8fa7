// The image's lower layer: Debian's Node.js runtime and the libraries it links, nothing else
// (no shell, no package manager), as an OCI image layout cached by its recipe.
//
// Debian 13 (trixie) because its nodejs is 20.19, which package.json's engines accept;
// bookworm's is 18. mmdebstrap's `extract` variant unpacks exactly nodejs and its dependency
// closure without running maintainer scripts: no Essential set, no dpkg, no apt in the image.
import { createHash } from "node:crypto";
import { mkdirSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { stampMatches, writeStamp } from "../controlplane/gobuild.js";
import { withLock } from "../controlplane/lock.js";
import { cacheRoot } from "../controlplane/paths.js";
import { phase, run, type Log } from "./run.js";

export const BASE = {
  suite: "trixie",
  mirror: "http://deb.debian.org/debian",
  packages: ["nodejs"],
  /**
   * Removed after extraction: documentation, shell completions, Node's package managers and
   * what apt leaves behind; the operator and the CLI use none of it. /usr/share/nodejs stays:
   * Debian's Node loads its unbundled modules (undici, cjs-module-lexer, acorn) from there.
   */
  prune: [
    "usr/share/doc",
    "usr/share/man",
    "usr/share/lintian",
    "usr/share/gdb",
    "usr/share/bash-completion",
    "usr/share/nodejs/corepack",
    "usr/bin/corepack",
    "etc/apt",
    "var/lib/apt",
    "var/cache/apt",
    "var/log/apt",
    "dev",
  ],
  /**
   * trixie's /usr is merged through directory symlinks that base-files' setup makes, which
   * `extract` never runs; the ELF interpreter is /lib64/ld-linux-x86-64.so.2.
   */
  symlinks: { bin: "usr/bin", sbin: "usr/sbin", lib: "usr/lib", lib64: "usr/lib64" },
} as const;

/** The tag of the base image inside its layout. */
export const BASE_TAG = "base";

function key(): string {
  return createHash("sha256").update(JSON.stringify(BASE)).digest("hex").slice(0, 16);
}

function baseDir(): string {
  return path.join(cacheRoot(), "image", `base-${key()}`);
}

/**
 * The OCI image layout holding the base image (tag BASE_TAG), built once from Debian's
 * mirror (tens of seconds) and then reused. `refresh` builds it again, to take in Debian's
 * updates.
 */
export async function ensureBase(umoci: string, log: Log, refresh = false): Promise<string> {
  const dir = baseDir();
  const layout = path.join(dir, "layout");
  const stamp = JSON.stringify(BASE);
  if (!refresh && stampMatches(dir, stamp, ["layout/index.json"])) return layout;
  mkdirSync(dir, { recursive: true });
  return withLock(path.join(dir, ".build.lock"), log, async () => {
    if (!refresh && stampMatches(dir, stamp, ["layout/index.json"])) return layout;
    rmSync(path.join(dir, ".complete"), { force: true });
    const rootfs = path.join(dir, "rootfs");
    rmSync(rootfs, { recursive: true, force: true });
    rmSync(layout, { recursive: true, force: true });
    await phase(`Debian ${BASE.suite}: ${BASE.packages.join(", ")} (mmdebstrap)`, log, () =>
      run("mmdebstrap", "mmdebstrap", [
        "--variant=extract",
        `--include=${BASE.packages.join(",")}`,
        "--format=directory",
        "--quiet",
        BASE.suite,
        rootfs,
        BASE.mirror,
      ]),
    );
    for (const p of BASE.prune) rmSync(path.join(rootfs, p), { recursive: true, force: true });
    for (const [link, target] of Object.entries(BASE.symlinks)) {
      rmSync(path.join(rootfs, link), { recursive: true, force: true });
      symlinkSync(target, path.join(rootfs, link));
    }
    // Mount points a runtime fills in.
    for (const d of ["dev", "proc", "sys"]) mkdirSync(path.join(rootfs, d), { recursive: true });
    await phase("base layer (umoci)", log, async () => {
      await run("umoci init", umoci, ["init", "--layout", layout]);
      await run("umoci new", umoci, ["new", "--image", `${layout}:${BASE_TAG}`]);
      await run("umoci insert", umoci, [
        "insert",
        "--image",
        `${layout}:${BASE_TAG}`,
        "--history.created_by",
        `mmdebstrap --variant=extract --include=${BASE.packages.join(",")} ${BASE.suite}`,
        rootfs,
        "/",
      ]);
    });
    rmSync(rootfs, { recursive: true, force: true });
    writeStamp(dir, stamp);
    return layout;
  });
}
