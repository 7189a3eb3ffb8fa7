import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  decodeEfiString,
  EfivarfsDir,
  encodeEfiString,
  LOADER_GUID,
} from "../../src/bootloader/efivars.js";
import { createBootloader, withBackend } from "../../src/bootloader/index.js";
import {
  bootIdMatches,
  entryFileName,
  parseEntryName,
  sortEntries,
  SystemdBootBootloader,
  systemdBootOnce,
} from "../../src/bootloader/systemd-boot.js";
import { systemdBootEsp } from "../support/esp.js";
import { judgeBoot } from "../../src/bootloader/types.js";
import { trialNotTaken } from "../../src/agent/steps.js";
import { isLikenError } from "../../src/errors.js";

describe("systemd-boot entry names", () => {
  const table: [string, string, number | null, number][] = [
    ["liken-a.conf", "liken-a.conf", null, 0],
    ["liken-b+3.conf", "liken-b.conf", 3, 0],
    ["liken-b+1-0.conf", "liken-b.conf", 1, 0],
    ["liken-b+0-1.conf", "liken-b.conf", 0, 1],
    ["debian-6.1+2-5.conf", "debian-6.1.conf", 2, 5],
    ["uki+1-2.efi", "uki.efi", 1, 2],
  ];
  it.each(table)("%s", (file, id, left, done) => {
    expect(parseEntryName(file)).toEqual({ file, id, left, done });
    if (left !== null && /-\d+\./.test(file)) expect(entryFileName(id, left, done)).toBe(file);
  });

  it("sorts entries with no tries left last", () => {
    const names = ["liken-a+0-3.conf", "liken-b.conf", "liken-c+2-0.conf"].map(parseEntryName);
    expect(sortEntries(names).map((e) => e.file)).toEqual([
      "liken-b.conf",
      "liken-c+2-0.conf",
      "liken-a+0-3.conf",
    ]);
  });
});

describe("efivarfs encoding", () => {
  it("is the attribute word then UTF-16LE with a NUL", () => {
    const b = encodeEfiString("liken-b.conf");
    expect(b.subarray(0, 4)).toEqual(Buffer.from([7, 0, 0, 0]));
    expect(b.subarray(4, 8)).toEqual(Buffer.from("li", "utf16le"));
    expect(b.subarray(-2)).toEqual(Buffer.from([0, 0]));
    expect(decodeEfiString(b, "x")).toBe("liken-b.conf");
    expect(() => decodeEfiString(Buffer.from([7, 0, 0]), "x")).toThrow(/3 bytes/);
  });
});

describe("systemd-boot backend with its firmware model", () => {
  let esp: string;
  let efi: string;
  let bl: SystemdBootBootloader;
  let vars: EfivarfsDir;
  const entries = (): string[] => readdirSync(join(esp, "loader", "entries")).sort();

  beforeEach(async () => {
    esp = mkdtempSync(join(tmpdir(), "liken-esp-"));
    efi = mkdtempSync(join(tmpdir(), "liken-efivars-"));
    vars = await systemdBootEsp(esp, efi);
    const created = createBootloader({ backend: "systemd-boot", esp, efivars: efi });
    bl = created as SystemdBootBootloader;
  });
  afterEach(() => {
    rmSync(esp, { recursive: true, force: true });
    rmSync(efi, { recursive: true, force: true });
  });

  it("stores the one-shot where bootctl would, as a glob that names the counted entry", async () => {
    await bl.armTrial("b");
    const raw = readFileSync(join(efi, `LoaderEntryOneShot-${LOADER_GUID}`));
    expect(decodeEfiString(raw, "x")).toBe("liken-b*.conf");
  });

  it("a one-shot of the bare id misses a counted entry: systemd-boot up to 258.2 boots the default", async () => {
    // What the first systemd-boot guest showed: armed, rebooted, and liken-a booted again.
    await bl.armTrial("b");
    await vars.set("LoaderEntryOneShot", "liken-b.conf");
    expect((await systemdBootOnce(esp, vars)).slot).toBe("a");
    expect(entries()).toEqual(["liken-a.conf", "liken-b+1-0.conf"]);
  });

  it("LoaderEntrySelected names what booted; a one-shot consumed without a counted try shows it", async () => {
    await bl.armTrial("b");
    await vars.set("LoaderEntryOneShot", "liken-b.conf");
    await systemdBootOnce(esp, vars);
    expect(await vars.get("LoaderEntrySelected")).toBe("liken-a.conf");
    const r = await bl.read();
    expect(r).toMatchObject({ defaultSlot: "a", armed: null, started: null });
    expect(r.shows).toBe(
      "LoaderEntryDefault=liken-a.conf LoaderEntryOneShot=(unset) " +
        "LoaderEntrySelected=liken-a.conf entry liken-b+1-0.conf",
    );
  });

  it("a boot manager that ignores the one-shot: it stays set, the default boots, nothing counted", async () => {
    await bl.armTrial("b");
    expect(await systemdBootOnce(esp, vars, { ignoreOneShot: true })).toEqual({
      id: "liken-a.conf",
      slot: "a",
      counted: false,
    });
    expect(entries()).toEqual(["liken-a.conf", "liken-b+1-0.conf"]);
    const r = await bl.read();
    expect(r).toMatchObject({ defaultSlot: "a", armed: "b", started: null });
    expect(r.shows).toContain("LoaderEntryOneShot=liken-b*.conf LoaderEntrySelected=liken-a.conf");
    // Disarmed, a later boot (whoever reboots) is the default, never the trial.
    await bl.disarm();
    expect(await vars.get("LoaderEntryOneShot")).toBeNull();
    expect((await systemdBootOnce(esp, vars)).slot).toBe("a");
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
  });

  it("the agent's rule reads these states: not taken, or a trial that started and fell back", async () => {
    const later = {
      bootId: "boot-2",
      armedTrial: { slot: "b" as const, bootId: "boot-1", shown: true },
    };
    const after = async (quirks: { ignoreOneShot?: boolean }, bareId: boolean) => {
      await bl.disarm();
      await bl.armTrial("b");
      if (bareId) await vars.set("LoaderEntryOneShot", "liken-b.conf");
      const boot = await systemdBootOnce(esp, vars, quirks);
      // A trial boot that panics: the next boot is the default's.
      if (boot.slot === "b") await systemdBootOnce(esp, vars);
      return trialNotTaken({ boot: judgeBoot(await bl.read(), "a"), ...later });
    };
    expect(await after({ ignoreOneShot: true }, false)).toBe("b"); // the one-shot still set
    expect(await after({}, true)).toBe("b"); // consumed, no try counted
    expect(await after({}, false)).toBeNull(); // counted: it started, and fell back
  });

  it("reads a trial armed with the bare id (an older agent's) as armed", async () => {
    await bl.armTrial("b");
    await vars.set("LoaderEntryOneShot", "liken-b.conf");
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: "b", started: null });
  });

  it("good trial: counted once, blessed after rejoining, then the default", async () => {
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
    await bl.armTrial("b");
    expect(entries()).toEqual(["liken-a.conf", "liken-b+1-0.conf"]);
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: "b", started: null });
    expect(await systemdBootOnce(esp, vars)).toEqual({
      id: "liken-b.conf",
      slot: "b",
      counted: true,
    });
    expect(entries()).toEqual(["liken-a.conf", "liken-b+0-1.conf"]);
    expect(judgeBoot(await bl.read(), "b")).toEqual({ kind: "on-trial", slot: "b" });
    await bl.confirm("b");
    expect(entries()).toEqual(["liken-a.conf", "liken-b.conf"]);
    expect((await systemdBootOnce(esp, vars)).slot).toBe("b");
    expect((await systemdBootOnce(esp, vars)).slot).toBe("b");
  });

  it("failed trial: the one-shot is gone, the next boot is the default, the agent sees it", async () => {
    await bl.armTrial("b");
    await systemdBootOnce(esp, vars); // the trial panics
    expect((await systemdBootOnce(esp, vars)).slot).toBe("a");
    expect(judgeBoot(await bl.read(), "a")).toEqual({
      kind: "trial-failed",
      slot: "b",
      running: "a",
    });
    await bl.disarm();
    expect(entries()).toEqual(["liken-a.conf", "liken-b.conf"]);
    expect(judgeBoot(await bl.read(), "a")).toEqual({ kind: "steady", slot: "a" });
  });

  it("refuses to trial the default or confirm what never booted, naming the backend", async () => {
    const err = await withBackend(bl, "arm trial", () => bl.armTrial("a")).catch((e) => e);
    expect(isLikenError(err, "LIKEN_BOOTLOADER_REFUSED")).toBe(true);
    expect((err as Error).message).toMatch(/^systemd-boot: arm trial: refusing/);
    await bl.armTrial("b");
    const c = await bl.confirm("b").catch((e) => e);
    expect(isLikenError(c, "LIKEN_BOOTLOADER_REFUSED")).toBe(true);
  });

  it("names a missing entry", async () => {
    rmSync(join(esp, "loader", "entries", "liken-b.conf"));
    const e = await bl.armTrial("b").catch((x) => x);
    expect(isLikenError(e, "LIKEN_BOOTLOADER_ENTRY_MISSING")).toBe(true);
    expect((e as Error).message).toContain("liken-b.conf");
  });
});

describe("bootIdMatches: systemd-boot's glob over whole entry ids", () => {
  it.each([
    ["liken-b*.conf", "liken-b+1-0.conf", true],
    ["liken-b*.conf", "liken-b.conf", true],
    ["liken-b*.conf", "liken-a+1-0.conf", false],
    ["liken-b.conf", "liken-b+1-0.conf", false],
    ["liken-b.conf", "liken-b.conf", true],
    ["liken-?.conf", "liken-a.conf", true],
    ["liken-a.conf", "liken-aXconf", false],
    ["liken-a", "liken-a.conf", false],
  ])("%s against %s: %s", (pattern, id, ok) => {
    expect(bootIdMatches(pattern, id)).toBe(ok);
  });
});

describe("createBootloader", () => {
  it("refuses an unknown backend by name", () => {
    const e = (() => {
      try {
        createBootloader({ backend: "lilo" } as never);
      } catch (x) {
        return x;
      }
    })();
    expect(isLikenError(e, "LIKEN_BOOTLOADER_UNKNOWN_BACKEND")).toBe(true);
    expect((e as Error).message).toContain('"lilo"');
  });

  it("builds the GRUB backend on a directory", () => {
    expect(createBootloader({ backend: "grub", envDir: "/nonexistent" }).backend).toBe("grub");
  });
});
