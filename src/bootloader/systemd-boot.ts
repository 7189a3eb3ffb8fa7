// liken's systemd-boot backend: boot counting by entry file names and the one-shot entry.
//   loader/entries/liken-a.conf          a blessed entry (no counter): a slot that proved itself
//   loader/entries/liken-b+1-0.conf      armed: one try left, none done
//   loader/entries/liken-b+0-1.conf      systemd-boot renamed it before booting it: a trial ran
// systemd-boot boots LoaderEntryOneShot once (and deletes it), otherwise LoaderEntryDefault;
// before booting an entry with a counter it renames the file to count the try; entries with no
// tries left sort last. Blessing after the machine rejoined = renaming the counter away, then
// making it the default.
//
// Which name a counted entry answers to depends on systemd-boot's version: up to 258.2 its id is
// the whole file name, lowercased (`liken-b+1-0.conf`); from 258.3 the counter is stripped
// (`liken-b.conf`, systemd#38813). Both match the variable as a glob (efi_fnmatch), so the trial
// is armed with the glob `liken-b*.conf`, which names the entry under every version.
// `EntryName.id` below is liken's own name for a slot's entry (the file name without the
// counter), not systemd-boot's.
import { join } from "node:path";
import { bootFilesOf, installBootFiles, type InstallHooks } from "./boot-files.js";
import type { EfiVars } from "./efivars.js";
import { DiskEntryDir, renameDurably, type EntryDir } from "./entry-dir.js";
import { BootloaderError } from "./errors.js";
import {
  isSlot,
  SLOTS,
  type Bootloader,
  type BootRecord,
  type BootSource,
  type Slot,
} from "./types.js";

export const ONESHOT = "LoaderEntryOneShot";
export const DEFAULT = "LoaderEntryDefault";
/** Set by systemd-boot at every boot (volatile): the id of the entry it booted. */
export const SELECTED = "LoaderEntrySelected";

export interface EntryName {
  /** The file name. */
  file: string;
  /** The entry id: the file name without the counter. */
  id: string;
  /** Tries left, or null for a blessed entry (no counter). */
  left: number | null;
  done: number;
}

const COUNTED = /^(.+?)\+(\d+)(?:-(\d+))?(\.conf|\.efi)$/;

/** Parses `NAME+LEFT-DONE.conf`, `NAME+LEFT.conf` or `NAME.conf` as systemd-boot does. */
export function parseEntryName(file: string): EntryName {
  const m = COUNTED.exec(file);
  if (m === null) return { file, id: file, left: null, done: 0 };
  return { file, id: `${m[1]}${m[4]}`, left: Number(m[2]), done: Number(m[3] ?? 0) };
}

export function entryFileName(id: string, left: number | null, done: number): string {
  if (left === null) return id;
  const dot = id.lastIndexOf(".");
  return `${id.slice(0, dot)}+${left}-${done}${id.slice(dot)}`;
}

/** Menu order: entries with no tries left go last (then systemd-boot's own order, here by id). */
export function sortEntries(entries: readonly EntryName[]): EntryName[] {
  const bad = (e: EntryName): number => (e.left === 0 ? 1 : 0);
  return [...entries].sort((x, y) => bad(x) - bad(y) || x.id.localeCompare(y.id));
}

export function slotEntryId(slot: Slot): string {
  return `liken-${slot}.conf`;
}

/** What arms a trial of the slot: a glob that matches its entry with or without a counter. */
export function slotOneShot(slot: Slot): string {
  return `liken-${slot}*.conf`;
}

/** The slot a variable names: an entry id, or the one-shot glob (older agents wrote the id). */
function slotOfId(id: string | null): Slot | null {
  const m = id === null ? null : /^liken-([ab])\*?\.conf$/.exec(id);
  const s = m?.[1];
  return isSlot(s) ? s : null;
}

/**
 * systemd-boot's match of a variable against an entry id (efi_fnmatch): the whole id, `*` any
 * run and `?` any one character; liken writes no bracket expressions, so they are taken literally.
 */
export function bootIdMatches(pattern: string, id: string): boolean {
  const re = pattern
    .split("")
    .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[\\^$.|+()[\]{}]/g, "\\$&")))
    .join("");
  return new RegExp(`^${re}$`).test(id);
}

/** The id systemd-boot up to 258.2 gives an entry: its file name, lowercased, counter included. */
export function bootIdOf(e: EntryName): string {
  return e.file.toLowerCase();
}

export class SystemdBootBootloader implements Bootloader {
  readonly backend = "systemd-boot" as const;

  /** The entry files: loader/entries on the ESP, unless a power-cut test gives its own. */
  readonly dir: EntryDir;

  /**
   * @param esp mount point of the ESP (holding loader/entries)
   * @param hooks tests stop an install midway with them (boot-files.ts)
   * @param dir the entries directory (power-cut tests); default loader/entries on the ESP
   */
  constructor(
    readonly esp: string,
    readonly vars: EfiVars,
    private readonly hooks: InstallHooks = {},
    dir?: EntryDir,
  ) {
    this.dir = dir ?? new DiskEntryDir(join(esp, "loader", "entries"));
  }

  get entriesDir(): string {
    return this.dir.path;
  }

  async entries(): Promise<EntryName[]> {
    return (await this.dir.list()).filter((f) => f.endsWith(".conf")).map(parseEntryName);
  }

  private async entryOf(slot: Slot): Promise<EntryName> {
    const e = (await this.entries()).find((x) => x.id === slotEntryId(slot));
    if (e === undefined) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_ENTRY_MISSING",
        `systemd-boot has no entry ${slotEntryId(slot)} in ${this.entriesDir}; reinstall the ` +
          "slot's boot entry",
        { context: { slot, dir: this.entriesDir } },
      );
    }
    return e;
  }

  /** Renames the entry for its counter, durably: a variable written next may name it. */
  private async setName(e: EntryName, left: number | null, done: number): Promise<void> {
    await renameDurably(this.dir, e.file, entryFileName(e.id, left, done));
  }

  async read(): Promise<BootRecord> {
    const def = slotOfId(await this.vars.get(DEFAULT));
    if (def === null) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_ENTRY_MISSING",
        `${DEFAULT} names no liken slot entry; set it with \`bootctl set-default liken-a.conf\``,
      );
    }
    const oneShotVar = await this.vars.get(ONESHOT);
    const oneShot = slotOfId(oneShotVar);
    let armed: Slot | null = null;
    let started: Slot | null = null;
    const files: string[] = [];
    for (const s of SLOTS) {
      if (s === def) continue;
      const e = await this.entryOf(s);
      files.push(e.file);
      if (e.left !== null && e.done === 0 && oneShot === s) armed = s;
      if (e.left !== null && e.done > 0) started = s;
    }
    // systemd-boot deletes the one-shot when it reads it and renames a counted entry before it
    // boots it; LoaderEntrySelected names what it booted. A one-shot still set after a boot, or
    // a counter untouched, is a trial it did not take.
    const selected = await this.vars.get(SELECTED);
    const shows =
      `${DEFAULT}=${await this.vars.get(DEFAULT)} ${ONESHOT}=${oneShotVar ?? "(unset)"} ` +
      `${SELECTED}=${selected ?? "(unset)"} entry ${files.join(" ")}`;
    return { defaultSlot: def, armed, started, shows };
  }

  async armTrial(slot: Slot): Promise<void> {
    const { defaultSlot } = await this.read();
    if (slot === defaultSlot) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_REFUSED",
        `refusing to arm a trial of slot ${slot}: it is already the default`,
        { context: { slot } },
      );
    }
    // One try, synced, then the one-shot: a cut in between leaves a counted entry nobody boots;
    // a one-shot written before the rename reached the ESP could boot the trial uncounted.
    await this.setName(await this.entryOf(slot), 1, 0);
    await this.vars.set(ONESHOT, slotOneShot(slot));
  }

  /** The release's kernel and initrd into `<esp>/liken/<slot>/`, named by the slot's entry. */
  async installBootFiles(slot: Slot, source: BootSource): Promise<void> {
    const files = bootFilesOf(source.release);
    if (files === null) return;
    const { defaultSlot } = await this.read();
    if (slot === defaultSlot) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_REFUSED",
        `refusing to install boot files of release ${source.release.version} for slot ${slot}: ` +
          "it is the default slot, whose kernel boots the machine",
        { context: { slot } },
      );
    }
    const entry = await this.entryOf(slot);
    await installBootFiles({
      esp: this.esp,
      entriesDir: this.entriesDir,
      entryFile: entry.file,
      slot,
      source,
      files,
      hooks: this.hooks,
    });
  }

  async confirm(slot: Slot): Promise<void> {
    const r = await this.read();
    if (r.defaultSlot === slot && r.started === null) return;
    if (r.started !== slot) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_REFUSED",
        `refusing to make slot ${slot} the default: systemd-boot started no trial of it`,
        { context: { slot, record: r } },
      );
    }
    // Bless first, then make it the default: a cut in between boots the old, still good slot.
    await this.setName(await this.entryOf(slot), null, 0);
    await this.vars.set(DEFAULT, slotEntryId(slot));
  }

  async disarm(): Promise<void> {
    const r = await this.read();
    await this.vars.delete(ONESHOT);
    for (const s of SLOTS) {
      if (s !== r.defaultSlot) await this.setName(await this.entryOf(s), null, 0);
    }
  }
}

/**
 * What systemd-boot does at one boot (the firmware model for this backend): the one-shot entry
 * if set (and deleted), else the default, else the first in menu order; a counted entry with
 * tries left is renamed to count this try before it boots. Ids are those of the systemd-boot the
 * testbed ships (252, as every version up to 258.2): the whole file name, matched as a glob.
 */
export async function systemdBootOnce(
  esp: string,
  vars: EfiVars,
  opts: { ignoreOneShot?: boolean; dir?: EntryDir } = {},
): Promise<{ id: string; slot: Slot | null; counted: boolean }> {
  const sb = new SystemdBootBootloader(esp, vars, {}, opts.dir);
  const entries = sortEntries(await sb.entries());
  // ignoreOneShot: a boot manager that does not honour LoaderEntryOneShot (another loader
  // chained first, a firmware boot entry past systemd-boot): the variable stays, the default boots.
  const oneShot = opts.ignoreOneShot === true ? null : await vars.get(ONESHOT);
  if (oneShot !== null) await vars.delete(ONESHOT);
  const def = await vars.get(DEFAULT);
  const named = (v: string | null): EntryName | undefined =>
    v === null ? undefined : entries.find((e) => bootIdMatches(v.toLowerCase(), bootIdOf(e)));
  const pick = named(oneShot) ?? named(def) ?? entries[0];
  if (pick === undefined)
    throw new BootloaderError(
      "LIKEN_BOOTLOADER_ENTRY_MISSING",
      `no boot entries in ${sb.entriesDir}`,
    );
  let counted = false;
  if (pick.left !== null && pick.left > 0) {
    // systemd-boot writes the renamed file through the firmware's file protocol and flushes it
    // before it starts the kernel (boot.c, entry_bump_counters).
    await renameDurably(sb.dir, pick.file, entryFileName(pick.id, pick.left - 1, pick.done + 1));
    counted = true;
  }
  await vars.set(SELECTED, bootIdOf(pick));
  return { id: pick.id, slot: slotOfId(pick.id), counted };
}
