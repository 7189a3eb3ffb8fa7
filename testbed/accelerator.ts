// Which accelerator QEMU runs liken's guests on: KVM only once a guest was seen running under
// it, TCG otherwise, with the reason. `/dev/kvm` opening is not enough: on a cloud machine
// without nested virtualization it opens, QEMU initializes the accelerator, and the guest's
// first instruction fails with "KVM internal error. Suberror: 1" (docs/testing.md, "Time").
// So the probe boots a tiny guest under KVM, a boot sector that writes a line to the serial
// port, and trusts KVM only if that line arrives.
import { spawn } from "node:child_process";
import { constants, accessSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type AcceleratorName = "kvm" | "tcg";

export interface Accelerator {
  name: AcceleratorName;
  /** One line: why this one (what the probe saw). */
  why: string;
}

/** What the probe's guest writes to its serial port. */
export const PROBE_LINE = "liken-accelerator-probe-ok";

/**
 * A boot sector (real mode, loaded at 0x7c00 by the BIOS) that writes PROBE_LINE to COM1 and
 * halts:
 *   cli; xor ax,ax; mov ds,ax; cld; mov dx,0x3f8; mov si,msg
 *   next: lodsb; test al,al; jz done; out dx,al; jmp next
 *   done: hlt; jmp done
 *   msg: PROBE_LINE, "\n", 0
 */
export function probeBootSector(): Buffer {
  const code = [
    0xfa, 0x31, 0xc0, 0x8e, 0xd8, 0xfc, 0xba, 0xf8, 0x03, 0xbe, 0x17, 0x7c, 0xac, 0x84, 0xc0, 0x74,
    0x03, 0xee, 0xeb, 0xf8, 0xf4, 0xeb, 0xfd,
  ];
  const sector = Buffer.alloc(512);
  Buffer.from(code).copy(sector, 0);
  Buffer.from(`${PROBE_LINE}\n\0`, "latin1").copy(sector, code.length);
  sector.writeUInt16LE(0xaa55, 510);
  return sector;
}

/**
 * How long the probe's guest may take to say its line: under TCG it does in under a second
 * (QEMU's start included), under a working KVM faster. A KVM without nested virtualization may
 * say nothing at all (seen here: no line, no error, until killed), so this is what a host
 * whose KVM does not work pays, once per process.
 */
const PROBE_DEADLINE_MS = 10_000;

/**
 * Boots the probe's guest on `accel` and says whether its line arrived, and if not what QEMU
 * said. It ends early when QEMU exits or reports an error, and never leaves QEMU running.
 */
export async function probe(
  accel: AcceleratorName,
  deadlineMs = PROBE_DEADLINE_MS,
): Promise<{ ran: boolean; said: string }> {
  const dir = mkdtempSync(join(tmpdir(), "liken-accel-"));
  try {
    const disk = join(dir, "probe.img");
    const serial = join(dir, "serial.log");
    writeFileSync(disk, probeBootSector());
    writeFileSync(serial, "");
    const child = spawn(
      "qemu-system-x86_64",
      [
        "-machine",
        `pc,accel=${accel}`,
        "-m",
        "16",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-drive",
        `file=${disk},format=raw,if=ide`,
        "-serial",
        `file:${serial}`,
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    let exited = false;
    const gone = new Promise<void>((r) => {
      child.once("exit", () => {
        exited = true;
        r();
      });
      child.once("error", (e) => {
        stderr += e.message;
        exited = true;
        r();
      });
    });
    const until = Date.now() + deadlineMs;
    let ran = false;
    while (Date.now() < until && !exited && !/error/i.test(stderr)) {
      if (readFileSync(serial, "latin1").includes(PROBE_LINE)) {
        ran = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (!ran && readFileSync(serial, "latin1").includes(PROBE_LINE)) ran = true;
    const endedByItself = exited;
    if (!exited) child.kill("SIGKILL");
    await gone;
    const error = stderr.split("\n").find((l) => /error/i.test(l));
    return {
      ran,
      said:
        error?.trim() ??
        (endedByItself
          ? "QEMU exited without its line"
          : `no line from it in ${deadlineMs / 1000} s`),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The decision, from what was seen: a pure function (test/unit/accelerator.test.ts).
 *
 * KVM only when asked for (LIKEN_QEMU_ACCEL=kvm) and then only on the probe's evidence. Not by
 * default: on this project's 2-core machines a real-mode boot sector runs under KVM while the
 * machine scenario's UEFI guest, on the same host, never reports (2026-12-05: the probe said
 * "ran", the grub scenario's Machine read Lost after 360 s), so a probe that passes does not prove
 * that every guest runs; on a host with working nested virtualization, ask for it.
 */
export function decide(seen: {
  forced?: string;
  kvmDevice: "missing" | "denied" | "opens";
  probe?: { ran: boolean; said: string };
}): Accelerator {
  if (seen.forced !== "kvm") {
    return {
      name: "tcg",
      why:
        seen.forced === "tcg"
          ? "LIKEN_QEMU_ACCEL=tcg"
          : "the default; LIKEN_QEMU_ACCEL=kvm asks for KVM, taken once a probe guest runs under it",
    };
  }
  if (seen.kvmDevice === "missing") return { name: "tcg", why: "no /dev/kvm on this host" };
  if (seen.kvmDevice === "denied") {
    return { name: "tcg", why: "/dev/kvm exists but this user cannot open it read-write" };
  }
  if (seen.probe === undefined) return { name: "tcg", why: "KVM not probed" };
  if (seen.probe.ran) return { name: "kvm", why: "asked for, and a probe guest ran under KVM" };
  return {
    name: "tcg",
    why: `/dev/kvm opens, but a probe guest did not run under KVM: ${seen.probe.said}`,
  };
}

function kvmDevice(): "missing" | "denied" | "opens" {
  try {
    accessSync("/dev/kvm", constants.R_OK | constants.W_OK);
    return "opens";
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : "denied";
  }
}

let chosen: Promise<Accelerator> | undefined;

/**
 * The accelerator for this process's guests, chosen once: TCG unless LIKEN_QEMU_ACCEL=kvm asks
 * for KVM, which is then probed (KVM is never taken on trust); any other value is refused.
 */
export function accelerator(): Promise<Accelerator> {
  chosen ??= (async () => {
    const forced = process.env.LIKEN_QEMU_ACCEL;
    if (forced !== undefined && forced !== "tcg" && forced !== "kvm") {
      throw new Error(
        `LIKEN_QEMU_ACCEL=${forced}: give tcg or kvm (kvm is taken only once a probe guest runs under it), or leave it unset for TCG`,
      );
    }
    const device = forced === "kvm" ? kvmDevice() : "opens";
    return decide({
      ...(forced === undefined ? {} : { forced }),
      kvmDevice: device,
      probe: forced === "kvm" && device === "opens" ? await probe("kvm") : undefined,
    });
  })();
  return chosen;
}

/** The line a scenario ends with: which accelerator its guests ran on, and why. */
export function acceleratorLine(a: Accelerator): string {
  return `accelerator: ${a.name.toUpperCase()} (${a.why})`;
}
