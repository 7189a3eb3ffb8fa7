// The machine image's pure parts (testbed/machine/): the partition table the disk and the
// scenario share, the systemd-boot entries the agent's backend renames, the kernel arguments
// the initrd and the agent read, and the module dependencies the initrd's load order follows.
import { describe, expect, it } from "vitest";
import { partitionTable } from "../../testbed/machine/disk.js";
import { slotArgs, TRIAL_ARGS } from "../../testbed/machine/esp.js";
import { entry } from "../../testbed/machine/esp-systemd-boot.js";
import { moduleDepends } from "../../testbed/build.js";
import { parseEntryName, slotEntryId } from "../../src/bootloader/systemd-boot.js";
import { runningSlotFromCmdline } from "../../src/bootloader/types.js";

const MiB = 1024 * 1024;

describe("the machine's partition table", () => {
  it("lays esp, liken-a, liken-b and liken-state end to end from 1 MiB, the slots alike", () => {
    const t = partitionTable(300);
    expect(t.esp.offset).toBe(MiB);
    expect(t["liken-a"].offset).toBe(t.esp.offset + t.esp.size);
    expect(t["liken-b"].offset).toBe(t["liken-a"].offset + t["liken-a"].size);
    expect(t["liken-state"].offset).toBe(t["liken-b"].offset + t["liken-b"].size);
    expect(t["liken-a"].size).toBe(300 * MiB);
    expect(t["liken-b"].size).toBe(t["liken-a"].size);
  });
});

describe("the boot entries", () => {
  it.each(["a", "b"] as const)(
    "systemd-boot's entry of slot %s boots it and reboots on a panic",
    (s) => {
      const options = /^options (.*)$/m.exec(entry(s))?.[1] ?? "";
      expect(runningSlotFromCmdline(options)).toBe(s);
      expect(options).toContain(`root=PARTLABEL=liken-${s}`);
      expect(options.split(" ")).toContain("panic=3");
      // The file name the agent's backend looks for, with no boot counter.
      expect(parseEntryName(slotEntryId(s))).toMatchObject({ id: `liken-${s}.conf`, left: null });
    },
  );

  it("GRUB's trial adds what the initrd reads as a trial and a reboot on a panic", () => {
    expect(TRIAL_ARGS.split(" ")).toEqual(expect.arrayContaining(["liken.trial=1", "panic=3"]));
    expect(slotArgs("b")).toContain("root=PARTLABEL=liken-b");
    expect(slotArgs("a")).toContain("console=ttyS0,115200");
  });
});

describe("moduleDepends", () => {
  const modinfo = (fields: string[]): Buffer =>
    Buffer.from(`\x7fELF...\0${fields.join("\0")}\0more`, "latin1");

  it("reads the depends= field of a module's .modinfo", () => {
    expect(
      moduleDepends(modinfo(["license=GPL", "depends=jbd2,mbcache,crc16", "intree=Y"])),
    ).toEqual(["jbd2", "mbcache", "crc16"]);
  });

  it("gives none for an empty field or none at all, and is not fooled by softdep", () => {
    expect(moduleDepends(modinfo(["depends=", "intree=Y"]))).toEqual([]);
    expect(moduleDepends(modinfo(["softdep=pre: crc32c", "license=GPL"]))).toEqual([]);
  });
});
