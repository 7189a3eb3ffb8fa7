// A release's own kernel and initrd on the ESP, for systemd-boot (docs/machine.md, "systemd-boot";
// docs/adr/systemd-boot-release-kernel.md). systemd-boot loads kernels only from the ESP, so a
// release that carries artifacts named `kernel` (and `initrd`) has them copied, from the slot
// where they were written and read back, to `<esp>/liken/<slot>/vmlinuz` (and `initrd.img`), and
// the slot's entry names them. A release without them leaves the entry's kernel lines alone.
//
// Must never: touch the running slot's files or entry; leave a half-written file under its final
// name (temp name, fsync, rename, fsync the directory); start writing without room for it all.
// A kill at any point leaves the other slot's boot as it was; the next attempt starts over.
// An attempt that finds the files and the entry as the release wants them writes nothing: the
// agent installs them when the slot is staged and checks them again before arming.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, readFile, readdir, rename, rm, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { fsyncPath } from "../native/index.js";
import { BootloaderError } from "./errors.js";
import type { BootArtifact, BootSource, Slot } from "./types.js";

/** The artifact names a release uses for systemd-boot's boot files, and their names on the ESP. */
export const BOOT_ARTIFACTS = { kernel: "vmlinuz", initrd: "initrd.img" } as const;
export type BootRole = keyof typeof BOOT_ARTIFACTS;

/** Where a slot's boot files live on the ESP, and how its entry names them. */
export function slotBootDir(slot: Slot): string {
  return `liken/${slot}`;
}

export interface BootFile {
  role: BootRole;
  artifact: BootArtifact;
}

/**
 * The release's boot files by the naming convention, or null when it has none (the entry keeps
 * the kernel it has). An initrd alone is refused: it would boot with a kernel of another release.
 */
export function bootFilesOf(release: BootSource["release"]): BootFile[] | null {
  const of = (role: BootRole): BootFile[] => {
    const a = release.artifacts.find((x) => x.name === role);
    return a === undefined ? [] : [{ role, artifact: a }];
  };
  const files = [...of("kernel"), ...of("initrd")];
  if (files.length === 0) return null;
  if (files[0]!.role !== "kernel") {
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_BOOT_FILES_INVALID",
      `release ${release.version} has an artifact named initrd but none named kernel; ` +
        "systemd-boot needs both from the same release: add the kernel as `-a kernel=FILE`, " +
        "or leave both out to boot the kernel already on the ESP",
      { context: { version: release.version } },
    );
  }
  return files;
}

/** Test hooks: `at(step)` runs before each step, so a test can stop the install there. */
export interface InstallHooks {
  at?: (step: string) => void;
}

const tmpName = (name: string): string => `.${name}.tmp`;

async function sizeOrZero(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch {
    return 0;
  }
}

const roundUp = (n: number, unit: number): number => Math.ceil(n / unit) * unit;

/**
 * Refuses before any write when the ESP cannot hold the files: what is free plus what the
 * slot's old boot files (about to go) hold, in whole clusters, against what the new ones need.
 */
async function checkRoom(esp: string, dir: string, files: BootFile[], version: string) {
  const fs = await statfs(esp);
  const cluster = Number(fs.bsize);
  const free = Number(fs.bavail) * cluster;
  let old = 0;
  for (const f of files) {
    for (const n of [BOOT_ARTIFACTS[f.role], tmpName(BOOT_ARTIFACTS[f.role])]) {
      old += roundUp(await sizeOrZero(join(dir, n)), cluster);
    }
  }
  // One cluster more per file for its directory entry (a new directory takes one too).
  const need = files.reduce((n, f) => n + roundUp(f.artifact.size, cluster) + cluster, cluster);
  if (need > free + old) {
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_ESP_FULL",
      `the ESP at ${esp} has ${free} bytes free (${old} more once the slot's old boot files ` +
        `in ${dir} go), but the kernel and initrd of release ${version} need ${need}; ` +
        "nothing was written: free space on the ESP (old kernels of other entries) or make it " +
        "bigger",
      { context: { esp, dir, free, old, need, version } },
    );
  }
}

/** Copies one artifact from the slot into `to` (a temp name), hashing it; synced. */
async function copyFromSlot(device: string, a: BootArtifact, to: string): Promise<void> {
  const h = createHash("sha256");
  const out = await open(to, "w", 0o644);
  try {
    if (a.size > 0) {
      const end = a.offset + a.size - 1;
      for await (const c of createReadStream(device, {
        start: a.offset,
        end,
      }) as AsyncIterable<Buffer>) {
        h.update(c);
        await out.write(c);
      }
    }
    await out.sync();
  } finally {
    await out.close();
  }
  const got = `sha256:${h.digest("hex")}`;
  const size = (await stat(to)).size;
  if (got !== a.digest || size !== a.size) {
    await rm(to, { force: true });
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_BOOT_FILE_MISMATCH",
      `artifact ${a.name} copied from ${device} at offset ${a.offset} is ${size} bytes with ` +
        `${got}, the release says ${a.size} bytes with ${a.digest}; nothing was installed: ` +
        "the slot no longer holds what its read-back found (a failing medium, or another " +
        "writer): check the disk",
      { retryable: true, context: { artifact: a.name, device, offset: a.offset } },
    );
  }
}

/** The entry with its `linux` and `initrd` lines naming `paths` (every other line kept). */
export function entryWithBootFiles(
  text: string,
  paths: { linux: string; initrd?: string },
): string {
  const mine = [`linux ${paths.linux}`, ...(paths.initrd ? [`initrd ${paths.initrd}`] : [])];
  const out: string[] = [];
  let placed = false;
  for (const l of text.split("\n")) {
    if (!/^\s*(linux|initrd)(\s|$)/.test(l)) out.push(l);
    else if (!placed) {
      out.push(...mine);
      placed = true;
    }
  }
  // An entry without a linux line (an efi or uki entry): after its title, else first.
  if (!placed) out.splice(out.findIndex((l) => /^\s*title(\s|$)/.test(l)) + 1, 0, ...mine);
  return out.join("\n");
}

/** The sha256 of a file, or null when it cannot be read. */
async function digestOfFile(file: string): Promise<string | null> {
  const h = createHash("sha256");
  try {
    for await (const c of createReadStream(file) as AsyncIterable<Buffer>) h.update(c);
  } catch {
    return null;
  }
  return `sha256:${h.digest("hex")}`;
}

/** The entry's text with its kernel lines pointing at `rel`'s files. */
function entryFor(text: string, rel: string, files: BootFile[]): string {
  const hasInitrd = files.some((f) => f.role === "initrd");
  return entryWithBootFiles(text, {
    linux: `/${rel}/${BOOT_ARTIFACTS.kernel}`,
    ...(hasInitrd ? { initrd: `/${rel}/${BOOT_ARTIFACTS.initrd}` } : {}),
  });
}

/**
 * Whether the slot's directory holds exactly the release's boot files (size and digest, nothing
 * else) and its entry already names them: then there is nothing to write. Reads the ESP copies
 * (a few tens of MiB at most), never the slot.
 */
async function installedAlready(
  dir: string,
  entry: string,
  rel: string,
  files: BootFile[],
): Promise<boolean> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch {
    return false;
  }
  const want = files.map((f) => BOOT_ARTIFACTS[f.role]).sort();
  if (names.join("/") !== want.join("/")) return false;
  for (const f of files) {
    const file = join(dir, BOOT_ARTIFACTS[f.role]);
    if ((await sizeOrZero(file)) !== f.artifact.size) return false;
    if ((await digestOfFile(file)) !== f.artifact.digest) return false;
  }
  const text = await readFile(entry, "utf8");
  return entryFor(text, rel, files) === text;
}

/**
 * Installs the release's boot files for `slot` under `<esp>/liken/<slot>/` and points the slot's
 * entry file (`entriesDir/entryFile`) at them. The caller checked that `slot` is not the one
 * that runs or boots by default. When they are there already (installed when the slot was
 * staged), it writes nothing.
 */
export async function installBootFiles(o: {
  esp: string;
  entriesDir: string;
  entryFile: string;
  slot: Slot;
  source: BootSource;
  files: BootFile[];
  hooks?: InstallHooks;
}): Promise<void> {
  const at = o.hooks?.at ?? (() => {});
  const rel = slotBootDir(o.slot);
  const dir = join(o.esp, rel);
  const entry = join(o.entriesDir, o.entryFile);
  if (await installedAlready(dir, entry, rel, o.files)) return;
  await checkRoom(o.esp, dir, o.files, o.source.release.version);
  await mkdir(dir, { recursive: true });
  fsyncPath(o.esp);
  fsyncPath(join(o.esp, "liken"));
  // What a killed attempt left, and the slot's old boot files: they are of the release this
  // slot held, gone from the slot already. Removed first, so the room counted above is there.
  for (const name of await readdir(dir)) await rm(join(dir, name), { force: true });
  fsyncPath(dir);
  for (const f of o.files) {
    const name = BOOT_ARTIFACTS[f.role];
    at(`copy ${f.role}`);
    await copyFromSlot(o.source.device, f.artifact, join(dir, tmpName(name)));
    at(`rename ${f.role}`);
    await rename(join(dir, tmpName(name)), join(dir, name));
    fsyncPath(dir);
  }
  at("entry");
  const text = await readFile(entry, "utf8");
  const next = entryFor(text, rel, o.files);
  if (next !== text) {
    // Replaced whole: a temp name systemd-boot skips (not *.conf), synced, renamed over.
    const tmp = join(o.entriesDir, tmpName(o.entryFile));
    const fh = await open(tmp, "w", 0o644);
    try {
      await fh.writeFile(next);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, entry);
    fsyncPath(o.entriesDir);
  }
}
