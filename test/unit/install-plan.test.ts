// The installer's pure decisions (src/install/layout.ts, disk.ts): where the partitions go, and
// which disk is refused, as tables. The same rules on real loop devices: test/native/machine-install.test.ts.
import { describe, expect, it } from "vitest";
import { refusal, mountsOf, type DiskFacts } from "../../src/install/disk.js";
import { bytesNeeded, MiB, planLayout, sgdiskArgs } from "../../src/install/layout.js";

describe("the installer's layout", () => {
  it("puts esp, liken-a, liken-b (same size) and liken-state in order, 1 MiB aligned", () => {
    const t = planLayout({ espMiB: 256, slotMiB: 1024 }, 8 * 1024 * MiB);
    expect(t.esp).toEqual({ offset: MiB, size: 256 * MiB });
    expect(t["liken-a"]).toEqual({ offset: 257 * MiB, size: 1024 * MiB });
    expect(t["liken-b"]).toEqual({ offset: 1281 * MiB, size: 1024 * MiB });
    // The state partition takes the rest, less the backup GPT's MiB.
    expect(t["liken-state"]).toEqual({ offset: 2305 * MiB, size: (8192 - 2305 - 1) * MiB });
    expect(bytesNeeded({ espMiB: 256, slotMiB: 1024 })).toBe((1 + 256 + 2048 + 64 + 1) * MiB);
  });

  it("names each partition and its type for sgdisk, by sector", () => {
    const t = planLayout({ espMiB: 64, slotMiB: 100, stateMiB: 192 }, 0);
    expect(sgdiskArgs(t).join(" ")).toBe(
      "-o -n 1:2048:133119 -t 1:ef00 -c 1:esp -n 2:133120:337919 -t 2:8300 -c 2:liken-a " +
        "-n 3:337920:542719 -t 3:8300 -c 3:liken-b -n 4:542720:935935 -t 4:8300 -c 4:liken-state",
    );
  });
});

describe("which disk the installer refuses", () => {
  const disk: DiskFacts = {
    path: "/dev/sdb",
    kind: "block",
    size: 64 * 1024 * MiB,
    model: "ATA SAMSUNG",
    signatures: [],
    partitions: [],
    mounts: [],
    holders: [],
    busy: false,
  };
  const need = 10 * 1024 * MiB;
  const rows: [string, Partial<DiskFacts>, boolean, string | undefined][] = [
    ["an empty disk big enough", {}, false, undefined],
    [
      "a partition table",
      { signatures: ["PTTYPE=gpt"] },
      false,
      "LIKEN_INSTALL_DISK_HAS_PARTITIONS",
    ],
    ["a partition table, --wipe", { signatures: ["PTTYPE=gpt"] }, true, undefined],
    [
      "a filesystem on the whole disk",
      { signatures: ["TYPE=ext4"] },
      false,
      "LIKEN_INSTALL_DISK_HAS_PARTITIONS",
    ],
    [
      "partitions the kernel lists",
      { partitions: ["sdb1"] },
      false,
      "LIKEN_INSTALL_DISK_HAS_PARTITIONS",
    ],
    ["mounted, even with --wipe", { mounts: ["sdb1 on /mnt"] }, true, "LIKEN_INSTALL_DISK_MOUNTED"],
    [
      "held by LVM, even with --wipe",
      { holders: ["sdb2 held by dm-0"] },
      true,
      "LIKEN_INSTALL_DISK_IN_USE",
    ],
    ["opened exclusively", { busy: true }, true, "LIKEN_INSTALL_DISK_IN_USE"],
    ["too small", { size: need - 1 }, true, "LIKEN_INSTALL_DISK_TOO_SMALL"],
  ];
  it.each(rows)("%s", (_what, facts, wipe, code) => {
    const r = refusal({ ...disk, ...facts }, need, wipe);
    expect(r?.code).toBe(code);
    if (r !== undefined) {
      expect(r.message).toMatch(/^\/dev\/sdb \(ATA SAMSUNG, \d+\.\d GiB\)/);
      expect(r.message).toContain("nothing was written to the disk");
    }
  });

  it("finds mounts by device number in mountinfo, and swap by path", () => {
    const info =
      "36 25 8:17 / /data rw,relatime shared:1 - ext4 /dev/sdb1 rw\n" +
      "37 25 8:1 / / rw - ext4 /dev/sda1 rw\n";
    const swaps = "Filename Type Size Used Priority\n/dev/sdb2 partition 1 0 -2\n";
    const devs = new Map([
      ["8:16", "sdb"],
      ["8:17", "sdb1"],
      ["8:18", "sdb2"],
    ]);
    expect(mountsOf(info, swaps, devs, ["/dev/sdb", "/dev/sdb1", "/dev/sdb2"])).toEqual([
      "sdb1 on /data",
      "/dev/sdb2 as swap",
    ]);
  });
});
