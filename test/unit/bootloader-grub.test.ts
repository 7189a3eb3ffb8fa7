import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DirEnvStore, ENV_FILES, MemoryEnvStore } from "../../src/bootloader/envstore.js";
import { bootMachine, grubBoot } from "../../src/bootloader/firmware.js";
import { GrubBootloader, initialEnvBlock } from "../../src/bootloader/grub.js";
import { getEnv, parseEnvBlock } from "../../src/bootloader/grubenv.js";
import {
  judgeBoot,
  runningSlotFromCmdline,
  type BootRecord,
  type BootVerdict,
} from "../../src/bootloader/types.js";
import { isLikenError } from "../../src/errors.js";

function fresh(): { store: MemoryEnvStore; bl: GrubBootloader } {
  const init = initialEnvBlock("a");
  const store = new MemoryEnvStore([Buffer.from(init), Buffer.from(init)]);
  return { store, bl: new GrubBootloader(store) };
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "resolved";
  } catch (e) {
    return isLikenError(e) ? e.code : String(e);
  }
}

describe("judgeBoot", () => {
  const rec = (d: "a" | "b", armed: "a" | "b" | null, started: "a" | "b" | null): BootRecord => ({
    defaultSlot: d,
    armed,
    started,
  });
  const table: [string, BootRecord, "a" | "b", BootVerdict][] = [
    ["steady on the default", rec("a", null, null), "a", { kind: "steady", slot: "a" }],
    ["armed, not rebooted", rec("a", "b", null), "a", { kind: "armed", slot: "b" }],
    ["on the trial", rec("a", null, "b"), "b", { kind: "on-trial", slot: "b" }],
    [
      "back on the old slot",
      rec("a", null, "b"),
      "a",
      { kind: "trial-failed", slot: "b", running: "a" },
    ],
    [
      "off the default by hand",
      rec("a", null, null),
      "b",
      { kind: "off-default", slot: "b", defaultSlot: "a" },
    ],
    ["steady on b", rec("b", null, null), "b", { kind: "steady", slot: "b" }],
  ];
  it.each(table)("%s", (_n, r, running, want) => {
    expect(judgeBoot(r, running)).toEqual(want);
  });

  it("reads the running slot from the kernel command line", () => {
    expect(runningSlotFromCmdline("BOOT_IMAGE=/vmlinuz liken.slot=b ro")).toBe("b");
    expect(() => runningSlotFromCmdline("ro quiet")).toThrow(/liken\.slot/);
    expect(() => runningSlotFromCmdline("liken.slot=c")).toThrow(/"c"/);
  });
});

describe("GRUB backend with the firmware model", () => {
  it("good trial: arm, GRUB boots it once, confirm makes it the default", async () => {
    const { store, bl } = fresh();
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
    expect((await grubBoot(store)).slot).toBe("a");
    await bl.armTrial("b");
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: "b", started: null });
    const trial = await grubBoot(store);
    expect(trial).toMatchObject({ slot: "b", trial: true, envCopy: 0 });
    expect(judgeBoot(await bl.read(), "b")).toEqual({ kind: "on-trial", slot: "b" });
    await bl.confirm("b");
    expect(await bl.read()).toMatchObject({ defaultSlot: "b", armed: null, started: null });
    expect(await grubBoot(store)).toMatchObject({ slot: "b", trial: false });
    expect(await grubBoot(store)).toMatchObject({ slot: "b", trial: false });
  });

  it("failed trial: the next boot is the old slot and the agent sees it", async () => {
    const { store, bl } = fresh();
    await bl.armTrial("b");
    expect(await bootMachine(store, { b: "panic" })).toMatchObject({
      slot: "b",
      trial: true,
      outcome: "panicked",
    });
    const back = await bootMachine(store, { b: "panic" });
    expect(back).toMatchObject({ slot: "a", trial: false, outcome: "up" });
    expect(judgeBoot(await bl.read(), "a")).toEqual({
      kind: "trial-failed",
      slot: "b",
      running: "a",
    });
    await bl.disarm();
    expect(judgeBoot(await bl.read(), "a")).toEqual({ kind: "steady", slot: "a" });
  });

  it("GRUB's own edit keeps the copy valid and touches nothing but its two lines", async () => {
    const { store, bl } = fresh();
    await bl.armTrial("b");
    const before = parseEnvBlock(store.copies[0] as Buffer);
    await grubBoot(store);
    const after = parseEnvBlock(store.copies[0] as Buffer);
    expect(after.map((v) => v.name)).toEqual(before.map((v) => v.name));
    expect(getEnv(after, "next_entry")).toBe("");
    expect(getEnv(after, "liken_trial")).toBe("b");
    expect(getEnv(after, "liken_seq")).toBe(getEnv(before, "liken_seq"));
    // The second copy still holds the armed state; the first wins.
    expect(getEnv(parseEnvBlock(store.copies[1] as Buffer), "next_entry")).toBe("b");
  });

  it("refuses what the agent must never do", async () => {
    const { bl } = fresh();
    expect(await code(bl.armTrial("a"))).toBe("LIKEN_BOOTLOADER_REFUSED");
    expect(await code(bl.confirm("b"))).toBe("LIKEN_BOOTLOADER_REFUSED");
    await bl.armTrial("b");
    // Armed but never booted: confirming would skip the trial.
    expect(await code(bl.confirm("b"))).toBe("LIKEN_BOOTLOADER_REFUSED");
  });

  it("is idempotent: a repeated call after a crash writes nothing", async () => {
    const { store, bl } = fresh();
    await bl.armTrial("b");
    const snap = store.copies.map((c) => Buffer.from(c as Buffer));
    await bl.armTrial("b");
    expect(store.copies.map((c) => (c as Buffer).equals(snap[0] as Buffer))).toEqual([true, true]);
    await grubBoot(store);
    await bl.confirm("b");
    const after = Buffer.from(store.copies[0] as Buffer);
    await bl.confirm("b");
    await bl.disarm();
    expect((store.copies[0] as Buffer).equals(after)).toBe(true);
  });

  it("keeps variables it does not own", async () => {
    const { store, bl } = fresh();
    const { envSet } = await import("../../src/bootloader/grubenv.js");
    const withOther = envSet(store.copies[0] as Buffer, "menu_auto_hide", "1");
    // Insert before liken_end by rebuilding through the backend: first make it a known variable.
    store.copies[0] = withOther;
    store.copies[1] = withOther;
    // liken_end is no longer the last line but the markers still agree: the copy is valid.
    await bl.armTrial("b");
    expect(getEnv(parseEnvBlock(store.copies[0] as Buffer), "menu_auto_hide")).toBe("1");
    const names = parseEnvBlock(store.copies[0] as Buffer).map((v) => v.name);
    expect(names[0]).toBe("liken_seq");
    expect(names[names.length - 1]).toBe("liken_end");
  });

  it("uses the second copy when the first is damaged, and repairs the first before writing", async () => {
    const { store, bl } = fresh();
    await bl.armTrial("b");
    const c0 = Buffer.from(store.copies[0] as Buffer);
    c0.write("9", c0.indexOf("liken_end=") + 12, "latin1"); // a torn write: markers disagree
    store.copies[0] = c0;
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: "b", started: null });
    expect((await grubBoot(store)).envCopy).toBe(1);
    store.copies[0] = Buffer.alloc(1024);
    const writes: number[] = [];
    const write = store.write.bind(store);
    store.write = (c, b) => {
      writes.push(c);
      return write(c, b);
    };
    await bl.disarm();
    expect(writes).toEqual([0, 1, 0]);
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
  });

  it("an environment GRUB cannot write boots the default, never the trial", async () => {
    const { store, bl } = fresh();
    await bl.armTrial("b");
    // Junk in the padding: GRUB still reads the copy, but its save_env refuses to edit it.
    const junk = Buffer.from(store.copies[0] as Buffer).fill(0x41, 900, 910);
    store.copies[0] = junk;
    expect(await grubBoot(store)).toMatchObject({ slot: "a", trial: false, envCopy: 0 });
    expect(await grubBoot(store)).toMatchObject({ slot: "a", trial: false });
    expect(await bl.read()).toMatchObject({ armed: "b", started: null });
  });

  it("names both copies when neither can be used", async () => {
    const store = new MemoryEnvStore([Buffer.alloc(1024), null]);
    const bl = new GrubBootloader(store);
    let err: unknown;
    try {
      await bl.read();
    } catch (e) {
      err = e;
    }
    expect(isLikenError(err, "LIKEN_BOOTLOADER_BOTH_COPIES_INVALID")).toBe(true);
    expect((err as Error).message).toMatch(/grubenv.*signature.*grubenv2 is missing/s);
    expect((await grubBoot(store)).slot).toBe("a");
  });
});

describe("DirEnvStore on real files", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "liken-grubenv-dir-"));
    for (const f of ENV_FILES) writeFileSync(join(dir, f), initialEnvBlock("a"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("writes both copies in place (same inode, same size) and reads them back", async () => {
    const ino = ENV_FILES.map((f) => statSync(join(dir, f)).ino);
    const bl = new GrubBootloader(new DirEnvStore(dir));
    await bl.armTrial("b");
    expect(ENV_FILES.map((f) => statSync(join(dir, f)).ino)).toEqual(ino);
    expect(ENV_FILES.map((f) => statSync(join(dir, f)).size)).toEqual([1024, 1024]);
    expect(getEnv(parseEnvBlock(readFileSync(join(dir, "grubenv"))), "next_entry")).toBe("b");
    expect(await new GrubBootloader(new DirEnvStore(dir)).read()).toMatchObject({ armed: "b" });
  });

  it("installGrubEnv creates missing copies and never overwrites a machine's state", async () => {
    const { installGrubEnv } = await import("../../src/bootloader/grub.js");
    const fresh = join(dir, "new", "EFI", "liken");
    await installGrubEnv(fresh, "b");
    expect(await new GrubBootloader(new DirEnvStore(fresh)).read()).toMatchObject({
      defaultSlot: "b",
      armed: null,
      started: null,
    });
    await new GrubBootloader(new DirEnvStore(dir)).armTrial("b");
    await installGrubEnv(dir, "a");
    expect(await new GrubBootloader(new DirEnvStore(dir)).read()).toMatchObject({ armed: "b" });
  });

  it("treats a truncated copy as damaged and says which file", async () => {
    writeFileSync(join(dir, "grubenv"), initialEnvBlock("a").subarray(0, 700));
    const [c0] = await new GrubBootloader(new DirEnvStore(dir)).copies();
    expect(c0.valid).toBe(false);
    expect(c0.valid ? "" : c0.reason).toMatch(/grubenv: 700 bytes instead of 1024/);
  });
});

describe("encodeLikenEnv", () => {
  it("writes what grub-editenv's create + set would, value escapes included", async () => {
    const { createEnvBlock, envSet } = await import("../../src/bootloader/grubenv.js");
    const { encodeLikenEnv } = await import("../../src/bootloader/grub.js");
    const others = [{ name: "note", value: "two\nlines \\ here" }];
    let want = createEnvBlock();
    for (const [n, v] of [
      ["liken_seq", "10000042"],
      ["note", "two\nlines \\ here"],
      ["saved_entry", "b"],
      ["liken_trial", ""],
      ["next_entry", "a"],
      ["liken_end", "10000042"],
    ] as const) {
      want = envSet(want, n, v);
    }
    const got = encodeLikenEnv({ saved: "b", next: "a", trial: null, others }, "10000042");
    expect(got.toString("latin1")).toBe(want.toString("latin1"));
  });
});
