// The machine's smoke boot: a copy of the disk with a dummy identity (no API server behind it)
// under QEMU TCG with OVMF, user networking with restrict=on and the i6300esb watchdog, watched
// on the serial console until systemd started liken-agent.service (its READY=1) and the agent
// logged; then the same agent process must keep logging past twice its WatchdogSec, with no
// reboot.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { accelerator, type AcceleratorName } from "../accelerator.js";
import { OVMF_VARS, startQemu, stopQemu } from "../qemu.js";
import { run } from "./cache.js";
import type { MachineImages } from "./contract.js";
import {
  GUEST_AGENT_LOG,
  GUEST_AGENT_READY,
  GUEST_API,
  GUEST_BOOT_LINE,
  GUEST_PANIC_LINE,
} from "./contract.js";
import { place } from "./disk.js";
import { writeStatePartition } from "./state.js";

export interface SmokeResult {
  bootloader: string;
  /** Seconds from QEMU's start: the initrd's LIKEN-BOOT line, systemd's "Started liken-agent". */
  initrdSeconds: number;
  agentReadySeconds: number;
  firstAgentLogSeconds: number;
  /** Seconds the agent was then watched serving, with no restart or reboot. */
  servedSeconds: number;
  /** The console's log, when the run kept its folder (opts.keep); else removed with it. */
  serialLog?: string;
  agentLines: string[];
}

const BOOT = new RegExp(GUEST_BOOT_LINE.source, "g");
const STARTED = GUEST_AGENT_READY;
const AGENT_LOG = GUEST_AGENT_LOG;
const BAD =
  /LIKEN-INITRD-ERROR.*|Kernel panic.*|liken-agent\.service: (Watchdog timeout|Main process exited|Scheduled restart).*|LIKEN_BOOTLOADER_\w+.*|Failed to start liken-agent.*|emergency mode.*/;

const ANSI = new RegExp(String.raw`\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\r`, "g");

/** The unit's WatchdogSec (config/systemd/liken-agent.service). */
const WATCHDOG_SEC = 30;
/** How long (guest seconds) one agent process must be seen logging: past two watchdog periods. */
const SERVE_PAST_S = 2 * WATCHDOG_SEC + 5;

/** The agent's log lines as the console shows them: the kernel's timestamp and the pid. */
function agentProcess(text: string): { seconds: number; pid: number }[] {
  return [...text.matchAll(/\[\s*(\d+\.\d+)\] liken\[(\d+)\]: \{/g)].map((m) => ({
    seconds: Number(m[1]),
    pid: Number(m[2]),
  }));
}

/** The serial log so far, without escape sequences. */
function serial(file: string): string {
  try {
    return readFileSync(file, "latin1").replace(ANSI, "");
  } catch {
    return "";
  }
}

async function until<T>(what: string, deadlineMs: number, f: () => T | undefined): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`smoke boot: no ${what} within ${deadlineMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface Guest {
  dir: string;
  serialLog: string;
  /** Seconds since QEMU started. */
  s: () => number;
  /** Throws when the console shows `bad` or QEMU exited. */
  check: (bad: RegExp | null) => void;
  /** Stops QEMU and cleans its folder (cleanGuestDir), saying when it kept some. */
  stop: (outcome: GuestOutcome, log: (s: string) => void) => Promise<void>;
}

/** How a smoke guest ended: its folder is removed, or kept whole, or only its logs kept. */
export type GuestOutcome = "passed" | "failed" | "keep";

/**
 * Cleans a smoke guest's folder (/tmp/liken-machine-smoke-*) once QEMU stopped. Passed: the
 * folder goes, so that a run leaves nothing behind. Failed: its logs stay (serial.log,
 * qemu.stderr, which the error names) and the disk copy and the firmware variables go (gigabytes
 * and a copy). Keep: all of it stays, for a person who asked to look.
 */
export function cleanGuestDir(dir: string, outcome: GuestOutcome): void {
  if (outcome === "keep") return;
  if (outcome === "passed") {
    rmSync(dir, { recursive: true, force: true });
    return;
  }
  for (const big of ["disk.img", "vars.fd"]) rmSync(join(dir, big), { force: true });
}

/** A copy of the disk with a dummy identity (and `slotA` written into liken-a), booting. */
function startGuest(images: MachineImages, accel: AcceleratorName, slotA?: string): Guest {
  const dir = mkdtempSync(join(tmpdir(), `liken-machine-smoke-${images.bootloader}-`));
  const disk = join(dir, "disk.img");
  run("cp", ["--sparse=always", images.disk, disk]);
  if (slotA !== undefined) place(disk, slotA, images.partitions["liken-a"].offset);
  const vars = join(dir, "vars.fd");
  copyFileSync(images.ovmfVars ?? OVMF_VARS, vars);
  writeStatePartition(disk, images, {
    machine: "smoke-1",
    cluster: "smoke",
    kubeconfig: dummyKubeconfig(),
  });
  const serialLog = join(dir, "serial.log");
  const t0 = Date.now();
  const child = startQemu({
    accel,
    dir,
    disk,
    throwawayDisk: true,
    vars,
    serialFile: serialLog,
    memoryMiB: 1024,
    // The user network with nothing behind it: the agent finds no API server.
    extra: ["-netdev", "user,id=n0,restrict=on", "-device", "virtio-net-pci,netdev=n0"],
    lifetimeSeconds: 900,
  });
  return {
    dir,
    serialLog,
    s: () => (Date.now() - t0) / 1000,
    check: (bad) => {
      const m = bad === null ? null : bad.exec(serial(serialLog));
      if (m !== null)
        throw new Error(`smoke boot: the serial console says: ${m[0]} (${serialLog})`);
      if (child.exitCode !== null) throw new Error(`smoke boot: QEMU exited (${dir}/qemu.stderr)`);
    },
    stop: async (outcome, log) => {
      await stopQemu(child);
      cleanGuestDir(dir, outcome);
      if (outcome !== "passed")
        log(`smoke: kept ${dir} (${outcome === "keep" ? "asked" : "its logs"})`);
    },
  };
}

export async function smokeBoot(
  images: MachineImages,
  log: (s: string) => void,
  /** keep: leave the guest's folder (disk copy, serial log) for a person to look at. */
  opts: { bootDeadlineMs?: number; serveDeadlineMs?: number; keep?: boolean } = {},
): Promise<SmokeResult> {
  const g = startGuest(images, (await accelerator()).name);
  const { s, serialLog } = g;
  const check = (): void => g.check(BAD);
  let outcome: GuestOutcome = "failed";
  try {
    const deadline = opts.bootDeadlineMs ?? 300_000;
    const boot = await until("LIKEN-BOOT line", deadline, () => {
      check();
      return [...serial(serialLog).matchAll(BOOT)][0];
    });
    const initrdSeconds = s();
    log(`smoke: ${boot[0]} at ${initrdSeconds.toFixed(1)} s`);
    await until("Started liken-agent.service", deadline, () => {
      check();
      return STARTED.exec(serial(serialLog)) ?? undefined;
    });
    const agentReadySeconds = s();
    log(`smoke: systemd started liken-agent.service at ${agentReadySeconds.toFixed(1)} s`);
    await until("agent log line", deadline, () => {
      check();
      return AGENT_LOG.exec(serial(serialLog)) ?? undefined;
    });
    const firstAgentLogSeconds = s();
    // Serving: the agent that logged first must still be the one logging when its WatchdogSec
    // has passed twice over. A missing WATCHDOG=1 gets it killed and restarted by systemd,
    // which says so in the journal only; on the console it shows as a new pid, or as silence.
    const first = agentProcess(serial(serialLog))[0];
    if (first === undefined) throw new Error(`smoke boot: no agent log line (${serialLog})`);
    const proof = await until(
      "agent log line past its WatchdogSec",
      opts.serveDeadlineMs ?? 120_000,
      () => {
        check();
        const text = serial(serialLog);
        const boots = [...text.matchAll(BOOT)].length;
        if (boots > 1) throw new Error(`smoke boot: the machine rebooted (${serialLog})`);
        const lines = agentProcess(text);
        const other = lines.find((l) => l.pid !== first.pid);
        if (other !== undefined) {
          throw new Error(
            `smoke boot: the agent restarted (pid ${first.pid}, then ${other.pid} at ${other.seconds} s; ${serialLog})`,
          );
        }
        return lines.find((l) => l.seconds - first.seconds >= SERVE_PAST_S);
      },
    );
    const text = serial(serialLog);
    const agentLines = text.split("\n").filter((l) => /liken-agent|liken\[\d+\]: /.test(l));
    outcome = opts.keep === true ? "keep" : "passed";
    return {
      bootloader: images.bootloader,
      initrdSeconds,
      agentReadySeconds,
      firstAgentLogSeconds,
      servedSeconds: proof.seconds - first.seconds,
      ...(outcome === "keep" ? { serialLog } : {}),
      agentLines,
    };
  } finally {
    await g.stop(outcome, log);
  }
}

/**
 * The panicking release booted from slot a of a systemd-boot disk (whose entries all carry
 * panic=3): its init's line, the kernel's panic, and the reboot that follows (a second boot).
 * Returns the seconds from the panic line to the next boot's LIKEN-BOOT line.
 */
export async function panicBoot(
  images: MachineImages,
  log: (s: string) => void,
  opts: { keep?: boolean } = {},
): Promise<number> {
  const bad = images.releases.find((r) => r.panics);
  if (bad === undefined || images.bootloader !== "systemd-boot") {
    throw new Error("panicBoot needs the systemd-boot disk and a release that panics");
  }
  const g = startGuest(images, (await accelerator()).name, bad.slotImage);
  let outcome: GuestOutcome = "failed";
  try {
    const text = (): string => serial(g.serialLog);
    await until("the release's panic line", 300_000, () => {
      g.check(/LIKEN-INITRD-ERROR.*/);
      return GUEST_PANIC_LINE.exec(text()) ?? undefined;
    });
    const at = g.s();
    log(`smoke: ${GUEST_PANIC_LINE.exec(text())?.[0]} at ${at.toFixed(1)} s`);
    await until("Kernel panic", 60_000, () => /Kernel panic[^\n]*/.exec(text()) ?? undefined);
    log(`smoke: ${/Kernel panic[^\n]*/.exec(text())?.[0]}`);
    await until("the boot after the panic", 300_000, () => {
      g.check(null);
      const boots = [...text().matchAll(BOOT)];
      return boots.length > 1 ? boots[1] : undefined;
    });
    log(
      `smoke: rebooted by panic=3: ${[...text().matchAll(BOOT)][1]?.[0]} at ${g.s().toFixed(1)} s`,
    );
    outcome = opts.keep === true ? "keep" : "passed";
    return g.s() - at;
  } finally {
    await g.stop(outcome, log);
  }
}

/** A kubeconfig naming the guest's API address with a token nobody checks (no API is there). */
function dummyKubeconfig(): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: smoke
  cluster: {server: "https://${GUEST_API.host}:${GUEST_API.port}", insecure-skip-tls-verify: true}
users:
- name: smoke
  user: {token: smoke}
contexts:
- name: smoke
  context: {cluster: smoke, user: smoke}
current-context: smoke
`;
}
