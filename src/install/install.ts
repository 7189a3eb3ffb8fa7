// `liken machine install|image`: a whole disk (or a raw disk image) made into a liken machine,
// as a list of named phases. Everything that can refuse runs before the first write, so a
// refused install leaves the disk as it was:
//   release     release.yaml checked against its digest; the rootfs carries the agent; it fits a
//               slot; the chunk indexes read and checked against their digests
//   disk        the target's model and size named; not mounted, not in use, big enough, empty or --wipe
//   esp         the bootloader's files in a FAT image (a temporary file)
//   -- the first write --
//   partition   (--wipe: old signatures wiped) a new GPT: esp, liken-a, liken-b, liken-state
//   slot-a      the release's artifacts through the native writer, read back and verified
//   slot-b      its first MiB zeroed: an old filesystem there must not look like a slot
//   esp-write   the FAT image into the ESP
//   state       ext4 with agent.yaml, the credential (0600) and slot a's record (its release
//               and the release's chunk indexes, so the first update need not read slot a), in place
//   check       the partition table read back (sgdisk -i), and the kernel told (block devices)
import { existsSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgentYaml } from "../agent/config-schema.js";
import type { MachineFrom } from "../agent/machine-name.js";
import type { RebootPolicy, Role } from "../api/types.js";
import { describeSize, diskFacts, refusal, targetKind, type DiskFacts } from "./disk.js";
import { checkAgentInRootfs } from "./agent-check.js";
import { InstallError, NOTHING_WRITTEN } from "./errors.js";
import {
  fatImage,
  grubEspFiles,
  kernelArgs,
  systemdBootEspFiles,
  type InstallBootloader,
} from "./esp.js";
import {
  bytesNeeded,
  MiB,
  parsePartitionInfo,
  PARTITIONS,
  planLayout,
  sgdiskArgs,
  type PartitionTable,
} from "./layout.js";
import { indexesFit, releaseIndexes } from "./indexes.js";
import { phase, type Log } from "./phases.js";
import {
  artifactBytes,
  loadRelease,
  releaseBytes,
  writeSlot,
  type ReleaseSource,
} from "./release.js";
import { agentYaml, agentYamlText, stateFilesystem, writeStateTree } from "./state.js";
import { place, run } from "./tools.js";

/** The state partition of a disk image when --state-size is not given. */
export const DEFAULT_IMAGE_STATE_MIB = 256;
/** Room for two kernels and two initrds (systemd-boot) with a wide margin. */
export const DEFAULT_ESP_MIB = 256;

export interface InstallOptions {
  target: string;
  mode: "disk" | "image";
  /** image: the file's size (default: exactly what the layout needs). */
  imageBytes?: number;
  espMiB: number;
  /** Default: twice what the release needs, so that later releases may grow. */
  slotMiB?: number;
  /** disk: default the rest of the disk; image: DEFAULT_IMAGE_STATE_MIB. */
  stateMiB?: number;
  bootloader: InstallBootloader;
  release: ReleaseSource;
  cluster: string;
  machine?: string;
  machineFrom?: MachineFrom;
  role?: Role;
  rebootPolicy?: RebootPolicy;
  credential:
    { kind: "bootstrap"; kubeconfig: string } | { kind: "kubeconfig"; kubeconfig: string };
  kernelArgs: string;
  trialArgs: string;
  serial: boolean;
  wipe: boolean;
  /** More files for the state partition (its path -> content), mode 0600. */
  stateFiles?: Record<string, Buffer | string>;
  /** Fields of agent.yaml beyond what the installer writes (the testbed's timeouts). */
  agentExtra?: Partial<AgentYaml>;
  log: Log;
}

export interface InstallResult {
  target: string;
  layout: PartitionTable;
  version: string;
  digest: string;
  facts: DiskFacts;
  agentYaml: string;
}

/** Twice the release's bytes, in whole MiB: a slot must hold every later release too. */
export function defaultSlotMiB(need: number): number {
  return Math.ceil((2 * need) / MiB);
}

export async function installMachine(o: InstallOptions): Promise<InstallResult> {
  const { log } = o;
  const work = mkdtempSync(join(tmpdir(), "liken-install-"));
  try {
    return await install(o, log, work);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function install(o: InstallOptions, log: Log, work: string): Promise<InstallResult> {
  let indexes = new Map<string, Buffer>();
  const r = await phase(log, "release", async () => {
    const r = await loadRelease(o.release);
    const v = r.release.version;
    const rootfs = r.release.artifacts.find((a) => a.name === "rootfs");
    if (rootfs === undefined || rootfs.offset !== 0)
      throw new InstallError(
        "LIKEN_INSTALL_RELEASE_UNUSABLE",
        `release ${v} has no artifact rootfs at offset 0 (it has ${r.release.artifacts.map((a) => a.name).join(", ")}); ${NOTHING_WRITTEN}. Build it with \`liken release build --from-image\` or \`-a rootfs=<slot image>\``,
      );
    if (o.bootloader === "systemd-boot")
      for (const name of ["kernel", "initrd"])
        if (!r.release.artifacts.some((a) => a.name === name))
          throw new InstallError(
            "LIKEN_INSTALL_RELEASE_UNUSABLE",
            `release ${v} has no ${name} artifact, which systemd-boot loads from the ESP; ${NOTHING_WRITTEN}. Build it with -a kernel=<vmlinuz> -a initrd=<initrd.img> (\`--from-image\` adds them), or install with --bootloader grub`,
          );
    const file = r.file(rootfs);
    if (file !== undefined) {
      const boot: Record<string, string> =
        o.bootloader === "grub" ? { kernel: "/boot/vmlinuz", initrd: "/boot/initrd.img" } : {};
      const note = checkAgentInRootfs(file, v, boot);
      if (note !== undefined) log(`warning: ${note}`);
    } else
      log(`warning: release ${v} comes from a channel: the agent in its rootfs is not checked`);
    log(
      `release ${v} (${r.digest}): ${r.release.artifacts.length} artifact(s), ${releaseBytes(r.release)} bytes in the slot`,
    );
    indexes = await releaseIndexes(r, log);
    return r;
  });

  const need = releaseBytes(r.release);
  const slotMiB = o.slotMiB ?? defaultSlotMiB(need);
  if (need > slotMiB * MiB)
    throw new InstallError(
      "LIKEN_INSTALL_SLOT_TOO_SMALL",
      `release ${r.release.version} needs ${need} bytes of a slot, --slot-size gives ${slotMiB * MiB}; ${NOTHING_WRITTEN}. Give --slot-size ${Math.ceil(need / MiB)}M or more (room for later releases: twice that)`,
      { context: { need, slot: slotMiB * MiB } },
    );
  const stateMiB = o.stateMiB ?? (o.mode === "image" ? DEFAULT_IMAGE_STATE_MIB : undefined);
  const req = { espMiB: o.espMiB, slotMiB, ...(stateMiB === undefined ? {} : { stateMiB }) };

  const facts = await phase(log, "disk", () => {
    const exists = o.mode === "disk" || existsSync(o.target);
    const kind = exists ? targetKind(o.target) : "file";
    if (o.mode === "disk" && kind !== "block")
      throw new InstallError(
        "LIKEN_INSTALL_NOT_A_DISK",
        `${o.target} is not a block device; ${NOTHING_WRITTEN}. For a disk image file use \`liken machine image ${o.target} --size ...\``,
      );
    if (o.mode === "image" && kind !== "file")
      throw new InstallError(
        "LIKEN_INSTALL_NOT_A_DISK",
        `${o.target} is a block device; ${NOTHING_WRITTEN}. To write a disk use \`liken machine install ${o.target}\``,
      );
    const size = o.mode === "image" ? (o.imageBytes ?? bytesNeeded(req)) : 0;
    const f: DiskFacts = exists
      ? diskFacts(o.target, kind)
      : {
          path: o.target,
          kind,
          size,
          model: "disk image file (new)",
          signatures: [],
          partitions: [],
          mounts: [],
          holders: [],
          busy: false,
        };
    if (o.mode === "image") f.size = size;
    log(`disk ${f.path}: ${f.model}, ${describeSize(f.size)} (${f.size} bytes)`);
    const no = refusal(f, bytesNeeded(req), o.wipe);
    if (no !== undefined) throw no;
    return f;
  });
  const layout = planLayout(req, facts.size);

  const args = kernelArgs(o.kernelArgs, o.trialArgs);
  const esp = join(work, "esp.fat");
  await phase(log, "esp", async () => {
    const files =
      o.bootloader === "grub"
        ? grubEspFiles(work, args, o.serial)
        : systemdBootEspFiles(args, {
            vmlinuz: (await artifactBytes(r, "kernel"))!,
            initrd: (await artifactBytes(r, "initrd"))!,
          });
    fatImage(esp, o.espMiB, files);
  });

  // The first write: everything above may refuse, nothing below does without having written.
  log(
    `writing ${facts.path} (${facts.model}, ${describeSize(facts.size)}): ${PARTITIONS.map((p) => `${p} ${describeSize(layout[p].size)}`).join(", ")}`,
  );
  await phase(log, "partition", () => {
    if (o.mode === "image") {
      if (o.wipe && existsSync(o.target)) truncateSync(o.target, 0);
      if (!existsSync(o.target)) writeFileSync(o.target, "");
      truncateSync(o.target, facts.size);
    }
    if (o.wipe) run("wipefs", ["-a", o.target]);
    run("sgdisk", [...sgdiskArgs(layout), o.target]);
  });
  // O_DIRECT on a block device (the page cache neither balloons nor hides the medium); a file
  // may sit on tmpfs, which refuses O_DIRECT: written through the page cache, then synced.
  const direct = facts.kind === "block";
  await phase(log, "slot-a", () =>
    writeSlot(o.target, layout["liken-a"].offset, r, { direct, log }),
  );
  await phase(log, "slot-b", () => {
    run("dd", [
      "if=/dev/zero",
      `of=${o.target}`,
      "bs=1M",
      "count=1",
      `seek=${layout["liken-b"].offset / MiB}`,
      "conv=notrunc,fsync",
      "status=none",
    ]);
  });
  await phase(log, "esp-write", () => place(o.target, esp, layout.esp.offset));
  const yaml = agentYamlText(
    agentYaml(
      {
        cluster: o.cluster,
        bootloader: o.bootloader,
        credential: o.credential.kind === "bootstrap" ? "bootstrap" : "kubeconfig",
        ...(o.machine === undefined ? {} : { machine: o.machine }),
        ...(o.machineFrom === undefined ? {} : { machineFrom: o.machineFrom }),
        ...(o.role === undefined ? {} : { role: o.role }),
        ...(o.rebootPolicy === undefined ? {} : { rebootPolicy: o.rebootPolicy }),
      },
      o.agentExtra,
    ),
  );
  await phase(log, "state", () => {
    const dir = join(work, "state");
    const s = layout["liken-state"];
    if (!indexesFit(indexes, s.size)) {
      log(
        `warning: the chunk indexes of release ${r.release.version} take more than a quarter of the ${describeSize(s.size)} state partition; not kept: the machine's first update reads slot a once to index it (give --state-size more room to avoid it)`,
      );
      indexes = new Map();
    }
    writeStateTree(dir, {
      agentYaml: yaml,
      credential: {
        file: o.credential.kind === "bootstrap" ? "bootstrap-kubeconfig" : "kubeconfig",
        text: o.credential.kubeconfig,
      },
      installed: {
        version: r.release.version,
        digest: r.digest,
        document: r.document,
        verifiedAt: new Date(),
        indexes,
      },
      ...(o.stateFiles === undefined ? {} : { files: o.stateFiles }),
    });
    stateFilesystem(o.target, dir, s.size, s.offset);
    if (facts.kind === "file") run("sync", ["-f", o.target]);
  });
  await phase(log, "check", () => {
    checkTable(o.target, layout);
    if (facts.kind === "block") {
      try {
        run("blockdev", ["--rereadpt", o.target]);
      } catch (e) {
        log(
          `warning: the kernel did not reread the partition table (${(e as Error).message}); run \`partprobe ${o.target}\` or reboot before using the partitions`,
        );
      }
    }
  });
  log(`installed release ${r.release.version} on ${o.target}`);
  return {
    target: o.target,
    layout,
    version: r.release.version,
    digest: r.digest,
    facts,
    agentYaml: yaml,
  };
}

/** Reads the table back: each partition must be where the layout says, with its label. */
export function checkTable(disk: string, t: PartitionTable): void {
  PARTITIONS.forEach((name, i) => {
    const got = parsePartitionInfo(run("sgdisk", ["-i", String(i + 1), disk]));
    const want = t[name];
    if (got.offset !== want.offset || got.size !== want.size || got.label !== name)
      throw new InstallError(
        "LIKEN_INSTALL_VERIFY_FAILED",
        `partition ${i + 1} of ${disk} reads back as '${got.label}' at ${got.offset}+${got.size}, not ${name} at ${want.offset}+${want.size}`,
      );
  });
}
