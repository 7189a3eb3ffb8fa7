// A power cut before, between or after every write liken makes to systemd-boot's state (entry
// renames on the ESP, LoaderEntryOneShot and LoaderEntryDefault) leaves a machine whose state
// liken reads as the one before the operation or the one after it, and that systemd-boot (the
// firmware model) boots exactly as that state says: never the trial slot without counting the
// try. The ESP is played as a directory whose renames are lost at a cut unless the directory was
// synced (FAT and ext4 keep a rename in the page cache until then); both outcomes of an unsynced
// rename (lost, kept) are checked. An EFI variable is stored when its write() returns (efivarfs).
import { describe, expect, it } from "vitest";
import type { EfiVars } from "../../src/bootloader/efivars.js";
import type { EntryDir } from "../../src/bootloader/entry-dir.js";
import {
  DEFAULT,
  ONESHOT,
  SystemdBootBootloader,
  systemdBootOnce,
} from "../../src/bootloader/systemd-boot.js";
import type { BootRecord, Slot } from "../../src/bootloader/types.js";

class PowerCut extends Error {}

/** Counts the writes of one operation; the `cutAt`-th (0-based) never happens, nor any after. */
class Power {
  writes = 0;
  constructor(private readonly cutAt: number) {}
  write(): void {
    if (this.writes++ >= this.cutAt) throw new PowerCut(`cut before write ${this.cutAt}`);
  }
}

/** An entries directory: `live` is what a running system lists, `durable` what survives a cut. */
class PlayedDir implements EntryDir {
  readonly path = "/esp/loader/entries";
  constructor(
    public live: string[],
    public durable: string[],
    private readonly power: Power | null,
  ) {}
  list(): Promise<string[]> {
    return Promise.resolve([...this.live]);
  }
  rename(from: string, to: string): Promise<void> {
    this.power?.write();
    if (!this.live.includes(from)) return Promise.reject(new Error(`ENOENT ${from}`));
    this.live = this.live.map((f) => (f === from ? to : f));
    return Promise.resolve();
  }
  sync(name?: string): Promise<void> {
    // A file's fsync stores its data, not its name; the directory's stores every name in it.
    if (name === undefined) this.durable = [...this.live];
    return Promise.resolve();
  }
}

class PlayedVars implements EfiVars {
  constructor(
    readonly map: Map<string, string>,
    private readonly power: Power | null,
  ) {}
  get(name: string): Promise<string | null> {
    return Promise.resolve(this.map.get(name) ?? null);
  }
  set(name: string, value: string): Promise<void> {
    this.power?.write();
    this.map.set(name, value);
    return Promise.resolve();
  }
  delete(name: string): Promise<void> {
    this.power?.write();
    this.map.delete(name);
    return Promise.resolve();
  }
}

interface Machine {
  entries: string[];
  vars: [string, string][];
}

const STEADY: Machine = {
  entries: ["liken-a.conf", "liken-b.conf"],
  vars: [[DEFAULT, "liken-a.conf"]],
};
const ARMED: Machine = {
  entries: ["liken-a.conf", "liken-b+1-0.conf"],
  vars: [
    [DEFAULT, "liken-a.conf"],
    [ONESHOT, "liken-b*.conf"],
  ],
};
/** systemd-boot consumed the one-shot and counted the try (the trial started). */
const STARTED: Machine = {
  entries: ["liken-a.conf", "liken-b+0-1.conf"],
  vars: [[DEFAULT, "liken-a.conf"]],
};

type Op = (bl: SystemdBootBootloader) => Promise<void>;
type State = Omit<BootRecord, "shows">;
/**
 * Confirm blesses the entry first, then makes it the default (systemd-boot.ts): a cut in between
 * reads as steady on the old default, which boots, as it did before the trial.
 */
const BLESSED_NOT_DEFAULT: State = { defaultSlot: "a", armed: null, started: null };
const CASES: [string, Machine, Op, State[]][] = [
  ["arm a trial", STEADY, (bl) => bl.armTrial("b"), []],
  ["withdraw an armed trial", ARMED, (bl) => bl.disarm(), []],
  ["forget a started trial", STARTED, (bl) => bl.disarm(), []],
  ["confirm the trial", STARTED, (bl) => bl.confirm("b"), [BLESSED_NOT_DEFAULT]],
];

function played(m: Machine, power: Power | null): { dir: PlayedDir; vars: PlayedVars } {
  return {
    dir: new PlayedDir([...m.entries], [...m.entries], power),
    vars: new PlayedVars(new Map(m.vars), power),
  };
}

async function stateOf(m: Machine): Promise<State> {
  const { dir, vars } = played(m, null);
  const { defaultSlot, armed, started } = await new SystemdBootBootloader(
    "/esp",
    vars,
    {},
    dir,
  ).read();
  return { defaultSlot, armed, started };
}

/** What systemd-boot must boot for a state: the armed trial, counted; else the default. */
function expectedBoot(r: State): { slot: Slot; counted: boolean } {
  return r.armed !== null
    ? { slot: r.armed, counted: true }
    : { slot: r.defaultSlot, counted: false };
}

describe("systemd-boot: power cut before, between and after every write", () => {
  it.each(CASES)("%s", async (_name, start, op, between) => {
    const before = await stateOf(start);
    const power = new Power(Number.MAX_SAFE_INTEGER);
    const done = played(start, power);
    await op(new SystemdBootBootloader("/esp", done.vars, {}, done.dir));
    const writes = power.writes;
    expect(writes).toBeGreaterThanOrEqual(2);
    const after = await stateOf({ entries: done.dir.live, vars: [...done.vars.map] });
    expect(after).not.toEqual(before);

    const seen = new Set<string>();
    // cutAt === writes: the operation returned, and the power went before anything else synced.
    for (let cutAt = 0; cutAt <= writes; cutAt++) {
      const m = played(start, new Power(cutAt));
      const r = await op(new SystemdBootBootloader("/esp", m.vars, {}, m.dir)).then(
        () => null,
        (e: unknown) => e,
      );
      if (cutAt < writes && !(r instanceof PowerCut)) {
        throw new Error(`cut before write ${cutAt}: ${String(r)}`);
      }
      for (const [kept, entries] of [
        ["unsynced renames lost", m.dir.durable],
        ["unsynced renames kept", m.dir.live],
      ] as const) {
        const at = `cut before write ${cutAt}, ${kept}`;
        const survivor: Machine = { entries: [...entries], vars: [...m.vars.map] };
        const state = await stateOf(survivor);
        const is = (s: State): boolean => JSON.stringify(state) === JSON.stringify(s);
        const which = is(before)
          ? "before"
          : is(after)
            ? "after"
            : between.some(is)
              ? "between"
              : undefined;
        expect({ at, state: which ?? state }).toEqual({ at, state: which ?? "before or after" });
        seen.add(which ?? "");
        const boot = played(survivor, null);
        const b = await systemdBootOnce("/esp", boot.vars, { dir: boot.dir });
        expect({ at, slot: b.slot, counted: b.counted }).toEqual({ at, ...expectedBoot(state) });
      }
    }
    // Early cuts keep the old state, late ones have the new one.
    expect(seen).toContain("before");
    expect(seen).toContain("after");
  });
});
