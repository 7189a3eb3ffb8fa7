// liken's GRUB backend: the boot-once trial through `next_entry`, the default through
// `saved_entry`, in two copies of the environment block so that a power cut at any byte of any
// write leaves a machine that boots one of its two good slots.
//
// The layout of each copy (grub-cfg.ts reads it the same way, and firmware.ts plays it):
//   liken_seq=NNNNNNNN   first line, a fresh number on every write by liken
//   ...                  variables liken does not own, kept in their order
//   saved_entry=a|b      the default slot
//   liken_trial=|a|b     the trial GRUB started (GRUB sets it when it consumes next_entry)
//   next_entry=|a|b      the boot-once trial armed for the next boot
//   liken_end=NNNNNNNN   last line, equal to liken_seq
// A copy is valid when both markers are present and equal. A write cut at byte k leaves the new
// bytes before k and the old after: the new first line with the old last line (they differ), or
// only the old lines (the old block, still valid), or the whole new block. The copies are read
// "first copy if valid, else the second", and written second copy first, then the first, each
// in place and synced, after repairing the first from the second when the first is invalid.
// GRUB edits in place (grub_envblk_set keeps every line where it is) and never touches the
// markers, so a copy GRUB edited stays valid.
import { mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import { BootloaderError } from "./errors.js";
import { ENV_FILES, type EnvCopy, type EnvStore } from "./envstore.js";
import {
  createEnvBlock,
  ENVBLK_SIGNATURE,
  ENVBLK_SIZE,
  escapeValue,
  getEnv,
  grubIterate,
  type EnvVar,
} from "./grubenv.js";
import { isSlot, type Bootloader, type BootRecord, type Slot } from "./types.js";

export const V = {
  seq: "liken_seq",
  saved: "saved_entry",
  trial: "liken_trial",
  next: "next_entry",
  end: "liken_end",
} as const;
const OWNED = new Set<string>(Object.values(V));

/** liken's view of one copy, read as GRUB reads it (values it would not use read as unset). */
export interface LikenEnv {
  seq: string;
  saved: Slot;
  next: Slot | null;
  trial: Slot | null;
  /** Variables liken does not own, kept across writes. */
  others: EnvVar[];
}

export type CopyState =
  | { copy: EnvCopy; valid: true; env: LikenEnv; bytes: Buffer }
  | { copy: EnvCopy; valid: false; reason: string; bytes: Buffer | null };

const SEQ = /^[1-9][0-9]{7}$/;
export const FIRST_SEQ = "10000000";

export function nextSeq(seq: string): string {
  const n = Number(seq) + 1;
  return n > 99_999_999 ? FIRST_SEQ : String(n);
}

/**
 * Decodes one copy the way grub.cfg judges it (GRUB's own lenient reading, grubIterate), so that
 * liken and GRUB always agree on which copy is current; never throws (an invalid copy is a
 * normal state after a power cut). Only the size is stricter than GRUB: liken writes exactly
 * ENVBLK_SIZE bytes in place and will not guess about a file someone replaced.
 */
export function decodeCopy(copy: EnvCopy, bytes: Buffer | null, where: string): CopyState {
  if (bytes === null) return { copy, valid: false, reason: `${where} is missing`, bytes };
  if (bytes.length !== ENVBLK_SIZE) {
    const reason = `${where}: ${bytes.length} bytes instead of ${ENVBLK_SIZE}`;
    return { copy, valid: false, reason, bytes };
  }
  const vars = grubIterate(bytes);
  if (vars === null) {
    const reason = `${where}: the \`# GRUB Environment Block\` signature is missing`;
    return { copy, valid: false, reason, bytes };
  }
  const seq = getEnv(vars, V.seq);
  const end = getEnv(vars, V.end);
  if (seq === undefined || !SEQ.test(seq) || seq !== end) {
    return {
      copy,
      valid: false,
      reason: `${where}: markers ${V.seq}=${seq ?? "(none)"} and ${V.end}=${end ?? "(none)"} disagree (a write was cut short)`,
      bytes,
    };
  }
  const slotOrNull = (name: string): Slot | null => {
    const v = getEnv(vars, name);
    return isSlot(v) ? v : null;
  };
  const env: LikenEnv = {
    seq,
    // grub.cfg boots slot a unless saved_entry says b: the same reading here.
    saved: getEnv(vars, V.saved) === "b" ? "b" : "a",
    next: slotOrNull(V.next),
    trial: slotOrNull(V.trial),
    others: vars.filter((v) => !OWNED.has(v.name)),
  };
  return { copy, valid: true, env, bytes };
}

/** The copy GRUB uses: the first if valid, else the second, else none. */
export function currentCopy(c0: CopyState, c1: CopyState): (CopyState & { valid: true }) | null {
  if (c0.valid) return c0;
  if (c1.valid) return c1;
  return null;
}

/**
 * The whole block liken writes: what grub-editenv's `create` followed by one `set` per line
 * makes (a fresh block only appends), built in one pass because the power cut tests encode
 * thousands of them.
 */
export function encodeLikenEnv(env: Omit<LikenEnv, "seq">, seq: string): Buffer {
  const lines: [string, string][] = [
    [V.seq, seq],
    ...env.others.map((o): [string, string] => [o.name, o.value]),
    [V.saved, env.saved],
    [V.trial, env.trial ?? ""],
    [V.next, env.next ?? ""],
    [V.end, seq],
  ];
  const buf = createEnvBlock();
  let p = buf.indexOf("\n", ENVBLK_SIGNATURE.length) + 1;
  for (const [name, value] of lines) {
    const line = Buffer.concat([
      Buffer.from(`${name}=`, "latin1"),
      escapeValue(value),
      Buffer.from("\n", "latin1"),
    ]);
    if (p + line.length > buf.length) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_ENV_NO_SPACE",
        `the GRUB environment does not fit in ${buf.length} bytes with ${name}; ` +
          "remove unused variables",
      );
    }
    p += line.copy(buf, p);
  }
  return buf;
}

type Edit = (env: LikenEnv) => Omit<LikenEnv, "seq"> | "unchanged";

export class GrubBootloader implements Bootloader {
  readonly backend = "grub" as const;

  constructor(readonly store: EnvStore) {}

  async copies(): Promise<[CopyState, CopyState]> {
    const read = async (c: EnvCopy): Promise<CopyState> =>
      decodeCopy(c, await this.store.read(c), this.store.describe(c));
    return [await read(0), await read(1)];
  }

  private async current(): Promise<{ c0: CopyState; cur: CopyState & { valid: true } }> {
    const [c0, c1] = await this.copies();
    const cur = currentCopy(c0, c1);
    if (cur === null) {
      throw new BootloaderError(
        "LIKEN_BOOTLOADER_BOTH_COPIES_INVALID",
        `both copies of the GRUB environment are unusable (${c0.valid ? "" : c0.reason}; ` +
          `${c1.valid ? "" : c1.reason}); GRUB boots slot a. Reinstall them with the slot that ` +
          "should boot as the default",
        { context: { copies: [this.store.describe(0), this.store.describe(1)] } },
      );
    }
    return { c0, cur };
  }

  async read(): Promise<BootRecord> {
    const { cur } = await this.current();
    const { env } = cur;
    // What grub.cfg reads at boot: it consumes next_entry and sets liken_trial in the same
    // save_env, so an armed next_entry with no liken_trial after a boot is a trial GRUB did not take.
    const shows =
      `${this.store.describe(cur.copy)}: ${V.saved}=${env.saved} ` +
      `${V.next}=${env.next ?? ""} ${V.trial}=${env.trial ?? ""}`;
    return { defaultSlot: env.saved, armed: env.next, started: env.trial, shows };
  }

  private async update(edit: Edit): Promise<void> {
    const { c0, cur } = await this.current();
    const next = edit(cur.env);
    if (next === "unchanged") return;
    // Must never write the second copy while the first is invalid: a cut then would leave none.
    if (!c0.valid) await this.store.write(0, cur.bytes);
    const bytes = encodeLikenEnv(next, nextSeq(cur.env.seq));
    await this.store.write(1, bytes);
    await this.store.write(0, bytes);
  }

  armTrial(slot: Slot): Promise<void> {
    return this.update((env) => {
      if (slot === env.saved) {
        throw new BootloaderError(
          "LIKEN_BOOTLOADER_REFUSED",
          `refusing to arm a trial of slot ${slot}: it is already the default; stage the release ` +
            "into the other slot",
          { context: { slot } },
        );
      }
      if (env.next === slot && env.trial === null) return "unchanged";
      return { ...env, next: slot, trial: null };
    });
  }

  confirm(slot: Slot): Promise<void> {
    return this.update((env) => {
      if (env.saved === slot && env.trial === null && env.next === null) return "unchanged";
      if (env.trial !== slot) {
        throw new BootloaderError(
          "LIKEN_BOOTLOADER_REFUSED",
          `refusing to make slot ${slot} the default: GRUB started no trial of it ` +
            `(default ${env.saved}, armed ${env.next ?? "none"}, started ${env.trial ?? "none"}); ` +
            "arm a trial and boot it first",
          { context: { slot, env } },
        );
      }
      return { ...env, saved: slot, trial: null, next: null };
    });
  }

  disarm(): Promise<void> {
    return this.update((env) =>
      env.next === null && env.trial === null ? "unchanged" : { ...env, next: null, trial: null },
    );
  }
}

/** The first bytes of both copies on a new machine: `defaultSlot` boots, nothing armed. */
export function initialEnvBlock(defaultSlot: Slot): Buffer {
  return encodeLikenEnv({ saved: defaultSlot, next: null, trial: null, others: [] }, FIRST_SEQ);
}

/**
 * Creates the two environment copies in `dir` (the ESP directory GRUB reads them from) for a
 * new machine or a lab machine, `defaultSlot` booting and nothing armed. Existing copies are
 * left alone: they hold the machine's state.
 */
export async function installGrubEnv(dir: string, defaultSlot: Slot): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const f of ENV_FILES) {
    let fh;
    try {
      fh = await open(join(dir, f), "wx");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") continue;
      throw e;
    }
    try {
      await fh.write(initialEnvBlock(defaultSlot));
      await fh.sync();
    } finally {
      await fh.close();
    }
  }
}
