// The installer (`liken machine install|image`, src/install/) on loop-backed disks and raw disk
// images, read back with the tools a person would use: sgdisk -p for the table, mtools for the
// ESP, debugfs for the state partition, SHA-256 of slot a's bytes against the release's digests.
// Each refusal (partitions without --wipe, mounted, in use, too small) leaves every byte of the
// disk as it was.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  closeSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { likenEntry } from "../../src/cli/entry.js";
import { isLikenError } from "../../src/errors.js";
import { installMachine, type InstallOptions } from "../../src/install/install.js";
import { MiB } from "../../src/install/layout.js";
import { buildRelease } from "../../src/release/build.js";
import { serveChannel } from "../../src/release/serve.js";
import { digestOf } from "../../src/verify/digest.js";
import type { Release } from "../../src/verify/release.js";
import { loopAvailable, withLoopDevice } from "./loop.js";

const sh = (cmd: string, args: string[]): string =>
  execFileSync(cmd, args, { encoding: "latin1", stdio: ["ignore", "pipe", "pipe"] });

let dir: string;
let releaseDir: string;
let release: Release;
let bareReleaseDir: string;
let kernel: Buffer;
const BOOTSTRAP =
  "apiVersion: v1\nkind: Config\nusers: [{name: b, user: {token: abcdef.0123456789abcdef}}]\n";

/** A root filesystem as a liken image must be (docs/day-1.md), as an ext4 slot image. */
function rootfs(root: string, withAgent: boolean): string {
  const put = (p: string, text: string | Buffer): void => {
    mkdirSync(path.dirname(path.join(root, p)), { recursive: true });
    writeFileSync(path.join(root, p), text);
  };
  put("boot/vmlinuz", kernel);
  put("boot/initrd.img", "initrd");
  put("etc/fstab", "PARTLABEL=liken-state /var/lib/liken ext4 defaults 0 2\n");
  if (withAgent) {
    put("usr/bin/liken", "#!/bin/sh\n");
    put("usr/lib/systemd/system/liken-agent.service", "[Service]\n");
    mkdirSync(path.join(root, "etc/systemd/system/multi-user.target.wants"), { recursive: true });
    symlinkSync(
      "/usr/lib/systemd/system/liken-agent.service",
      path.join(root, "etc/systemd/system/multi-user.target.wants/liken-agent.service"),
    );
  }
  const img = `${root}.ext4`;
  sh("mke2fs", ["-q", "-t", "ext4", "-d", root, img, "12M"]);
  return img;
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "liken-install-test-"));
  kernel = createHash("sha256").update("kernel").digest();
  kernel = Buffer.concat(Array.from({ length: 4096 }, () => kernel)); // 128 KiB
  writeFileSync(path.join(dir, "vmlinuz"), kernel);
  writeFileSync(path.join(dir, "initrd.img"), "initrd");
  const build = async (version: string, img: string) =>
    buildRelease({
      version,
      out: path.join(dir, "channel"),
      artifacts: [
        { name: "rootfs", file: img },
        { name: "kernel", file: path.join(dir, "vmlinuz") },
        { name: "initrd", file: path.join(dir, "initrd.img") },
      ],
    });
  const r = await build("1.0.0", rootfs(path.join(dir, "root"), true));
  releaseDir = r.dir;
  release = r.release;
  bareReleaseDir = (await build("0.9.0", rootfs(path.join(dir, "bare"), false))).dir;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A sparse file of `mib` MiB. */
function diskFile(name: string, mib: number): string {
  const f = path.join(dir, name);
  rmSync(f, { force: true });
  writeFileSync(f, "");
  execFileSync("truncate", ["-s", `${mib}M`, f]);
  return f;
}

function sha256File(f: string): string {
  return createHash("sha256").update(readFileSync(f)).digest("hex");
}

function bytesAt(f: string, offset: number, size: number): Buffer {
  const fd = openSync(f, "r");
  try {
    const b = Buffer.alloc(size);
    readSync(fd, b, 0, size, offset);
    return b;
  } finally {
    closeSync(fd);
  }
}

const logs: string[] = [];
function options(target: string, o: Partial<InstallOptions> = {}): InstallOptions {
  return {
    target,
    mode: "disk",
    espMiB: 32,
    slotMiB: 16,
    stateMiB: 64,
    bootloader: "grub",
    release: { dir: releaseDir },
    cluster: "prod",
    credential: { kind: "bootstrap", kubeconfig: BOOTSTRAP },
    kernelArgs: "root=PARTLABEL=liken-%s rw",
    trialArgs: "panic=10",
    serial: false,
    wipe: false,
    log: (l) => logs.push(l),
    ...o,
  };
}

async function refused(o: InstallOptions): Promise<string> {
  try {
    await installMachine(o);
  } catch (e) {
    if (isLikenError(e)) return `${e.code}: ${e.message}`;
    throw e;
  }
  throw new Error("the install was not refused");
}

/** The state partition's file `p`, read with debugfs at its offset in the disk file. */
function stateFile(disk: string, offset: number, p: string): string {
  return sh("debugfs", ["-R", `cat ${p}`, `${disk}?offset=${offset}`]);
}
function stateMode(disk: string, offset: number, p: string): string {
  return /Mode:\s+(\d+)/.exec(sh("debugfs", ["-R", `stat ${p}`, `${disk}?offset=${offset}`]))![1]!;
}

describe("liken machine install on a loop device", () => {
  it.skipIf(!loopAvailable)(
    "lays out the table by label, GRUB on the ESP, slot a verified, agent.yaml and the credential (0600)",
    async () => {
      const f = diskFile("grub.img", 160);
      let facts = "";
      await withLoopDevice(f, async (loop) => {
        const r = await installMachine(options(loop));
        facts = `${r.facts.model} ${r.facts.size}`;
      });
      expect(facts).toBe(`loop device backed by ${f} ${160 * MiB}`);
      expect(logs.join("\n")).toMatch(
        /phase release: begin[\s\S]*phase slot-a: done[\s\S]*phase check: done/,
      );
      expect(logs.join("\n")).toContain(`disk /dev/loop`);

      // The table, as sgdisk prints it.
      const table = sh("sgdisk", ["-p", f]);
      const rows = [...table.matchAll(/^\s+(\d)\s+(\d+)\s+(\d+)\s+\S+ \S+\s+(\w+)\s+(\S+)$/gm)].map(
        (m) => `${m[1]} ${m[2]} ${m[4]} ${m[5]}`,
      );
      expect(rows).toEqual([
        "1 2048 EF00 esp",
        `2 ${33 * 2048} 8300 liken-a`,
        `3 ${49 * 2048} 8300 liken-b`,
        `4 ${65 * 2048} 8300 liken-state`,
      ]);

      // The ESP, as mtools reads it: GRUB, liken's grub.cfg, both environment copies.
      const esp = `${f}@@${MiB}`;
      expect(sh("mdir", ["-b", "-i", esp, "::/EFI/liken"]).split("\n").sort().join(" ")).toContain(
        "::/EFI/liken/grub.cfg ::/EFI/liken/grubenv ::/EFI/liken/grubenv2",
      );
      const cfg = sh("mtype", ["-i", esp, "::/EFI/liken/grub.cfg"]);
      expect(cfg).toContain("linux (hd0,gpt2)/boot/vmlinuz liken.slot=a root=PARTLABEL=liken-a rw");
      expect(cfg).toContain("liken.slot=b root=PARTLABEL=liken-b rw panic=10");
      expect(sh("mtype", ["-i", esp, "::/EFI/liken/grubenv"])).toContain("saved_entry=a");
      expect(sh("mdir", ["-b", "-i", esp, "::/EFI/BOOT"])).toContain("BOOTX64.EFI");

      // Slot a: every artifact's bytes at its offset hash to the release's digest.
      const slotA = 33 * MiB;
      for (const a of release.artifacts) {
        const got = createHash("sha256")
          .update(bytesAt(f, slotA + a.offset, a.size))
          .digest("hex");
        expect(`sha256:${got}`, a.name).toBe(a.digest);
      }
      // Slot b's first MiB is zero: no old filesystem there looks like a slot.
      expect(bytesAt(f, 49 * MiB, MiB).every((b) => b === 0)).toBe(true);

      // The state partition: agent.yaml, the credential 0600, slot a's record.
      const state = 65 * MiB;
      const yaml = parse(stateFile(f, state, "/etc/agent.yaml")) as Record<string, unknown>;
      expect(yaml).toMatchObject({
        cluster: "prod",
        kubeconfig: "/var/lib/liken/identity/kubeconfig",
        identity: { bootstrapKubeconfig: "/etc/liken/bootstrap-kubeconfig" },
        slots: {
          a: { device: "/dev/disk/by-partlabel/liken-a" },
          b: { device: "/dev/disk/by-partlabel/liken-b" },
        },
        stateDir: "/var/lib/liken",
        bootloader: { backend: "grub", envDir: "/boot/efi/EFI/liken" },
      });
      // No machine: the agent names itself from the hostname or the DMI serial.
      expect(yaml).not.toHaveProperty("machine");
      expect(stateFile(f, state, "/etc/bootstrap-kubeconfig")).toBe(BOOTSTRAP);
      expect(stateMode(f, state, "/etc/bootstrap-kubeconfig")).toBe("0600");
      expect(JSON.parse(stateFile(f, state, "/slot-a/marker.json"))).toMatchObject({
        state: "staged",
        version: "1.0.0",
      });
      expect(stateFile(f, state, "/slot-a/release.yaml")).toBe(
        readFileSync(path.join(releaseDir, "release.yaml"), "latin1"),
      );
    },
  );

  it.skipIf(!loopAvailable)(
    "refuses a disk with partitions unless --wipe, writing nothing",
    async () => {
      const f = diskFile("twice.img", 160);
      await withLoopDevice(f, async (loop) => {
        await installMachine(options(loop));
        const before = sha256File(f);
        const why = await refused(options(loop));
        expect(why).toMatch(
          /^LIKEN_INSTALL_DISK_HAS_PARTITIONS: \/dev\/loop\d+ \(loop device backed by .*, 160 MiB\) is not empty: PTTYPE=gpt.*nothing was written to the disk. If nothing on it is needed, run again with --wipe/,
        );
        expect(sha256File(f)).toBe(before);
        await installMachine(options(loop, { wipe: true, machine: "node-9" }));
      });
      expect(stateFile(f, 65 * MiB, "/etc/agent.yaml")).toContain("machine: node-9");
    },
  );

  it.skipIf(!loopAvailable)(
    "refuses a mounted disk, even with --wipe, writing nothing",
    async () => {
      const f = diskFile("mounted.img", 160);
      const mnt = mkdtempSync(path.join(dir, "mnt-"));
      await withLoopDevice(f, async (loop) => {
        sh("mke2fs", ["-q", "-t", "ext4", loop]);
        sh("mount", [loop, mnt]);
        try {
          const before = sha256File(f);
          const why = await refused(options(loop, { wipe: true }));
          expect(why).toMatch(
            new RegExp(
              `^LIKEN_INSTALL_DISK_MOUNTED: ${loop} \\(.*\\) is in use: ${path.basename(loop)} on ${mnt}; nothing was written to the disk. Unmount it`,
            ),
          );
          expect(sha256File(f)).toBe(before);
        } finally {
          sh("umount", [mnt]);
        }
      });
    },
  );

  it.skipIf(!loopAvailable)(
    "refuses a disk another program holds exclusively, writing nothing",
    async () => {
      const f = diskFile("held.img", 160);
      await withLoopDevice(f, async (loop) => {
        const fd = openSync(loop, constants.O_RDONLY | constants.O_EXCL);
        try {
          const before = sha256File(f);
          const why = await refused(options(loop, { wipe: true }));
          expect(why).toMatch(
            /^LIKEN_INSTALL_DISK_IN_USE: .* another program holds it open exclusively; nothing was written/,
          );
          expect(sha256File(f)).toBe(before);
        } finally {
          closeSync(fd);
        }
      });
    },
  );

  it.skipIf(!loopAvailable)(
    "refuses a disk too small for the layout, writing nothing",
    async () => {
      const f = diskFile("small.img", 100);
      await withLoopDevice(f, async (loop) => {
        const before = sha256File(f);
        const why = await refused(options(loop));
        expect(why).toMatch(
          /^LIKEN_INSTALL_DISK_TOO_SMALL: .*holds 104857600 bytes, the layout needs 136314880 \(31457280 more\); nothing was written/,
        );
        expect(sha256File(f)).toBe(before);
      });
    },
  );
});

describe("liken machine image", () => {
  it("writes a raw disk image with systemd-boot: entries and the release's kernel on the ESP", async () => {
    const f = path.join(dir, "sdboot.img");
    const r = await installMachine(
      options(f, { mode: "image", bootloader: "systemd-boot", stateMiB: undefined }),
    );
    // 1 + 32 + 2 x 16 + 256 (the image's default state partition) + 1 MiB.
    expect(r.facts.size).toBe(322 * MiB);
    const esp = `${f}@@${MiB}`;
    expect(sh("mtype", ["-i", esp, "::/loader/entries/liken-b.conf"])).toBe(
      "title liken slot b\nlinux /liken/b/vmlinuz\ninitrd /liken/b/initrd.img\noptions root=PARTLABEL=liken-b rw liken.slot=b panic=10\n",
    );
    const tmp = path.join(dir, "vmlinuz.copy");
    sh("mcopy", ["-n", "-i", esp, "::/liken/a/vmlinuz", tmp]);
    expect(readFileSync(tmp).equals(kernel)).toBe(true);
    const state = 65 * MiB;
    expect(parse(stateFile(f, state, "/etc/agent.yaml"))).toMatchObject({
      bootloader: {
        backend: "systemd-boot",
        esp: "/boot/efi",
        efivars: "/sys/firmware/efi/efivars",
      },
    });
  });

  it("takes the release from a channel URL, checked against the catalog digest", async () => {
    const server = await serveChannel(path.join(dir, "channel"));
    try {
      const f = path.join(dir, "channel.img");
      const digest = digestOf(readFileSync(path.join(releaseDir, "release.yaml")));
      const r = await installMachine(
        options(f, { mode: "image", release: { channel: server.url, version: "1.0.0", digest } }),
      );
      expect(r.digest).toBe(digest);
      for (const a of release.artifacts) {
        const got = createHash("sha256")
          .update(bytesAt(f, 33 * MiB + a.offset, a.size))
          .digest("hex");
        expect(`sha256:${got}`, a.name).toBe(a.digest);
      }
      expect(logs.join("\n")).toContain(
        "comes from a channel: the agent in its rootfs is not checked",
      );
      const wrong = await refused(
        options(path.join(dir, "wrong.img"), {
          mode: "image",
          release: { channel: server.url, version: "1.0.0", digest: `sha256:${"1".repeat(64)}` },
        }),
      );
      expect(wrong).toMatch(/^LIKEN_VERIFY_DIGEST_MISMATCH/);
    } finally {
      await server.close();
    }
  });

  it("refuses a release larger than --slot-size, before creating the image", async () => {
    const f = path.join(dir, "slot.img");
    const why = await refused(options(f, { mode: "image", slotMiB: 8 }));
    expect(why).toMatch(
      /^LIKEN_INSTALL_SLOT_TOO_SMALL: release 1.0.0 needs \d+ bytes of a slot, --slot-size gives 8388608; nothing was written to the disk. Give --slot-size 13M or more/,
    );
    expect(() => readFileSync(f)).toThrow(/ENOENT/);
  });

  it("refuses a release whose rootfs has no agent, before creating the image", async () => {
    const f = path.join(dir, "bare.img");
    const why = await refused(options(f, { mode: "image", release: { dir: bareReleaseDir } }));
    expect(why).toMatch(
      /^LIKEN_INSTALL_RELEASE_UNUSABLE: release 0.9.0: its rootfs has no launcher \/usr\/bin\/liken, unit \/usr\/lib\/systemd\/system\/liken-agent.service, enabled .*; nothing was written/,
    );
    expect(() => readFileSync(f)).toThrow(/ENOENT/);
  });

  it("refuses a release directory whose release.yaml is not the catalog's digest", async () => {
    const f = path.join(dir, "digest.img");
    const why = await refused(
      options(f, {
        mode: "image",
        release: { dir: releaseDir, digest: `sha256:${"0".repeat(64)}` },
      }),
    );
    expect(why).toMatch(/^LIKEN_VERIFY_DIGEST_MISMATCH/);
  });
});

describe("the liken machine command", () => {
  const cli = (args: string[]) => {
    const r = spawnSync(process.execPath, [likenEntry(), "machine", ...args], { encoding: "utf8" });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };

  it("makes the bootstrap kubeconfig from its parts, adds --state-file files, logs each phase", () => {
    const f = path.join(dir, "cli.img");
    writeFileSync(path.join(dir, "token"), "abcdef.0123456789abcdef\n");
    writeFileSync(
      path.join(dir, "ca.crt"),
      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    );
    writeFileSync(path.join(dir, "kubelet.kubeconfig"), "kubelet: bootstrap\n");
    const r = cli([
      "image",
      f,
      "--release",
      releaseDir,
      "--cluster",
      "prod",
      "--role",
      "Leader",
      "--esp-size",
      "32M",
      "--slot-size",
      "16M",
      "--state-size",
      "64M",
      "--api-server",
      "https://10.0.0.1:6443",
      "--ca",
      path.join(dir, "ca.crt"),
      "--bootstrap-token-file",
      path.join(dir, "token"),
      "--state-file",
      `node/kubelet-bootstrap.kubeconfig=${path.join(dir, "kubelet.kubeconfig")}`,
    ]);
    expect(r.err).toMatch(
      /liken machine: phase release: begin\n[\s\S]*liken machine: phase check: done in \d+ ms/,
    );
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("role: Leader");
    const state = 65 * MiB;
    const boot = parse(stateFile(f, state, "/etc/bootstrap-kubeconfig")) as {
      clusters: { cluster: { server: string; "certificate-authority-data": string } }[];
      users: { user: { token: string } }[];
    };
    expect(boot.clusters[0]!.cluster.server).toBe("https://10.0.0.1:6443");
    expect(boot.users[0]!.user.token).toBe("abcdef.0123456789abcdef");
    expect(stateFile(f, state, "/node/kubelet-bootstrap.kubeconfig")).toBe("kubelet: bootstrap\n");
    expect(stateMode(f, state, "/node/kubelet-bootstrap.kubeconfig")).toBe("0600");
  });

  it("refuses in one line with a stable code and what to do", () => {
    const r = cli(["image", path.join(dir, "x.img"), "--release", releaseDir, "--cluster", "prod"]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /^liken: give one credential: --bootstrap-kubeconfig FILE, or --api-server URL --ca FILE --bootstrap-token-file FILE, or --kubeconfig FILE \(the machine's own\); nothing was written to the disk \[LIKEN_INSTALL_BAD_INPUT\]\n$/,
    );
  });
});
