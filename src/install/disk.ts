// What the installer knows of the target before it writes (facts, read-only), and the rules
// that refuse a target (a pure decision over the facts, table-tested). Nothing here writes.
//   partitions  a partition table or a filesystem signature (blkid -p), or partitions the kernel lists
//   mounted     the disk or one of its partitions in /proc/self/mountinfo or /proc/swaps
//   in use      holders in /sys/block/<disk>/holders (LVM, RAID, dm-crypt), or an O_EXCL open refused
//   too small   fewer bytes than the layout needs
import {
  closeSync,
  constants,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
} from "node:fs";
import path from "node:path";
import { deviceInfo } from "../native/index.js";
import { InstallError, NOTHING_WRITTEN } from "./errors.js";
import { run } from "./tools.js";

export interface DiskFacts {
  path: string;
  kind: "block" | "file";
  size: number;
  /** Vendor and model from sysfs (a loop device: its backing file). */
  model: string;
  /** What blkid -p found on the whole disk: PTTYPE=gpt, TYPE=ext4... */
  signatures: string[];
  /** Partitions the kernel lists under /sys/class/block/<disk>/. */
  partitions: string[];
  /** Mount points of the disk or its partitions, and swap areas on them. */
  mounts: string[];
  /** Devices stacked on the disk or its partitions (dm-0, md0). */
  holders: string[];
  /** The O_EXCL open was refused (EBUSY): something holds the device exclusively. */
  busy: boolean;
}

const GiB = 1024 ** 3;

export function describeSize(n: number): string {
  return n >= GiB ? `${(n / GiB).toFixed(1)} GiB` : `${(n / 1024 ** 2).toFixed(0)} MiB`;
}

function read(p: string): string {
  try {
    return readFileSync(p, "utf8").trim();
  } catch {
    return "";
  }
}

/** blkid -p's findings (partition table type, filesystem type), or none. */
export function probeSignatures(target: string): string[] {
  try {
    const out = run("blkid", ["-p", "-o", "export", target]);
    return out
      .split("\n")
      .filter((l) => /^(PTTYPE|TYPE)=/.test(l))
      .map((l) => l.trim());
  } catch (e) {
    // blkid -p exits 2 when it finds nothing: an empty disk.
    if (/exit 2\)/.test((e as Error).message)) return [];
    throw e;
  }
}

/** "major:minor" of each device name in `names`, from sysfs. */
function devNumbers(sys: string, names: string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const n of names) {
    const d = read(path.join(sys, n === path.basename(sys) ? "" : n, "dev"));
    if (d !== "") m.set(d, n);
  }
  return m;
}

/** Mount points whose source is one of `devs` (mountinfo's 3rd field is major:minor). */
export function mountsOf(
  mountinfo: string,
  swaps: string,
  devs: Map<string, string>,
  paths: string[],
): string[] {
  const out: string[] = [];
  for (const line of mountinfo.split("\n")) {
    const f = line.split(" ");
    if (f.length > 4 && devs.has(f[2]!)) out.push(`${devs.get(f[2]!)} on ${f[4]}`);
  }
  for (const line of swaps.split("\n").slice(1)) {
    const src = line.split(/\s+/)[0];
    if (src && paths.includes(src)) out.push(`${src} as swap`);
  }
  return out;
}

export function diskFacts(target: string, kind: "block" | "file"): DiskFacts {
  const size = deviceInfo(target).size;
  const signatures = probeSignatures(target);
  if (kind === "file") {
    return {
      path: target,
      kind,
      size,
      model: "disk image file",
      signatures,
      partitions: [],
      mounts: [],
      holders: [],
      busy: false,
    };
  }
  const name = path.basename(realpathSync(target));
  const sys = `/sys/class/block/${name}`;
  const partitions = existsSync(sys)
    ? readdirSync(sys).filter(
        (e) => e.startsWith(name) && existsSync(path.join(sys, e, "partition")),
      )
    : [];
  const names = [name, ...partitions];
  const devs = devNumbers(sys, names);
  const mounts = mountsOf(
    read("/proc/self/mountinfo"),
    read("/proc/swaps"),
    devs,
    names.map((n) => `/dev/${n}`),
  );
  const holders = names.flatMap((n) => {
    const h = path.join(sys, n === name ? "" : n, "holders");
    return existsSync(h) ? readdirSync(h).map((x) => `${n} held by ${x}`) : [];
  });
  const backing = read(path.join(sys, "loop/backing_file"));
  const model =
    backing !== ""
      ? `loop device backed by ${backing}`
      : [read(path.join(sys, "device/vendor")), read(path.join(sys, "device/model"))]
          .filter((s) => s !== "")
          .join(" ") || "unknown model";
  let busy = false;
  try {
    // O_EXCL on a block device: refused (EBUSY) while it is mounted or another program holds it so.
    closeSync(openSync(target, constants.O_RDONLY | constants.O_EXCL));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EBUSY") throw e;
    busy = true;
  }
  return { path: target, kind, size, model, signatures, partitions, mounts, holders, busy };
}

/** Whether `target` is a block device (install) or a file (image); refuses anything else. */
export function targetKind(target: string): "block" | "file" {
  let st;
  try {
    st = statSync(target);
  } catch (cause) {
    throw new InstallError(
      "LIKEN_INSTALL_NOT_A_DISK",
      `${target}: ${(cause as Error).message}; name a disk such as /dev/sdb (lsblk lists them)`,
      { cause },
    );
  }
  if (st.isBlockDevice()) return "block";
  if (st.isFile()) return "file";
  throw new InstallError(
    "LIKEN_INSTALL_NOT_A_DISK",
    `${target} is neither a block device nor a disk image file; ${NOTHING_WRITTEN}`,
  );
}

/** The first rule `f` breaks, as the error to throw; undefined: the disk may be written. */
export function refusal(f: DiskFacts, need: number, wipe: boolean): InstallError | undefined {
  const what = `${f.path} (${f.model}, ${describeSize(f.size)})`;
  const context = { disk: f.path, model: f.model, size: f.size };
  if (f.mounts.length > 0)
    return new InstallError(
      "LIKEN_INSTALL_DISK_MOUNTED",
      `${what} is in use: ${f.mounts.join(", ")}; ${NOTHING_WRITTEN}. Unmount it (or pick another disk): the installer never writes a mounted disk, --wipe or not`,
      { context: { ...context, mounts: f.mounts } },
    );
  if (f.holders.length > 0 || f.busy)
    return new InstallError(
      "LIKEN_INSTALL_DISK_IN_USE",
      `${what} is in use: ${f.holders.length > 0 ? f.holders.join(", ") : "another program holds it open exclusively"}; ${NOTHING_WRITTEN}. Stop what uses it (vgchange -an, mdadm --stop, cryptsetup close) or pick another disk`,
      { context: { ...context, holders: f.holders } },
    );
  if (f.size < need)
    return new InstallError(
      "LIKEN_INSTALL_DISK_TOO_SMALL",
      `${what} holds ${f.size} bytes, the layout needs ${need} (${need - f.size} more); ${NOTHING_WRITTEN}. Use a bigger disk, or smaller --slot-size/--esp-size/--state-size`,
      { context: { ...context, need } },
    );
  const found = [...f.signatures, ...f.partitions.map((p) => `partition ${p}`)];
  if (found.length > 0 && !wipe)
    return new InstallError(
      "LIKEN_INSTALL_DISK_HAS_PARTITIONS",
      `${what} is not empty: ${found.join(", ")}; ${NOTHING_WRITTEN}. If nothing on it is needed, run again with --wipe (everything on it is lost)`,
      { context: { ...context, found } },
    );
  return undefined;
}
