// The machine's smoke boot: a copy of the disk with a dummy identity (no API server behind it)
// under QEMU TCG with OVMF, user networking with restrict=on and the i6300esb watchdog, watched
// on the serial console until systemd started liken-agent.service (its READY=1) and the agent
// logged; then it must keep serving: no restart, no reboot for longer than its WatchdogSec.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { run } from "./cache.js";
import type { MachineImages } from "./contract.js";
import { GUEST_API } from "./contract.js";
import { writeStatePartition } from "./state.js";

export const OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd";
export const OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd";

/** QEMU's arguments for the machine (no guestfwd: the scenario adds its own -netdev). */
export function qemuArgs(o: { disk: string; vars: string; serialLog: string; netdev: string }): string[] {
  return [
    "-machine",
    "q35,accel=tcg",
    "-m",
    "1024",
    "-smp",
    "1",
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-drive",
    `if=pflash,format=raw,unit=0,readonly=on,file=${OVMF_CODE}`,
    "-drive",
    `if=pflash,format=raw,unit=1,file=${o.vars}`,
    "-drive",
    `file=${o.disk},format=raw,if=virtio,cache=unsafe`,
    "-netdev",
    o.netdev,
    "-device",
    "virtio-net-pci,netdev=n0",
    "-device",
    "i6300esb",
    "-action",
    "watchdog=reset",
    "-chardev",
    `file,id=ser0,path=${o.serialLog}`,
    "-serial",
    "chardev:ser0",
  ];
}

export interface SmokeResult {
  bootloader: string;
  /** Seconds from QEMU's start: the initrd's LIKEN-BOOT line, systemd's "Started liken-agent". */
  initrdSeconds: number;
  agentReadySeconds: number;
  firstAgentLogSeconds: number;
  /** Seconds the agent was then watched serving, with no restart or reboot. */
  servedSeconds: number;
  serialLog: string;
  agentLines: string[];
}

const BOOT = /LIKEN-BOOT slot=([ab]) version=(\S+) trial=([01])/g;
const STARTED = /Started liken-agent\.service/;
/** The agent's pino lines, as the console shows them from the journal: `liken[250]: {...}`. */
const AGENT_LOG = /liken\[\d+\]: \{"level":\d+.*"msg":.*$/m;
const BAD =
  /LIKEN-INITRD-ERROR.*|Kernel panic.*|liken-agent\.service: (Watchdog timeout|Main process exited|Scheduled restart).*|LIKEN_BOOTLOADER_\w+.*|Failed to start liken-agent.*|emergency mode.*/;

const ANSI = new RegExp(String.raw`\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\r`, "g");

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

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) {
    return Promise.resolve();
  }
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  // To `timeout`, which passes it on to QEMU (and SIGKILLs it 10 s later if still up).
  process.kill(child.pid, "SIGTERM");
  return exited;
}

export async function smokeBoot(
  images: MachineImages,
  log: (s: string) => void,
  opts: { bootDeadlineMs?: number; serveMs?: number; keep?: boolean } = {},
): Promise<SmokeResult> {
  const dir = mkdtempSync(join(tmpdir(), `liken-machine-smoke-${images.bootloader}-`));
  const disk = join(dir, "disk.img");
  run("cp", ["--sparse=always", images.disk, disk]);
  const vars = join(dir, "vars.fd");
  copyFileSync(images.ovmfVars ?? OVMF_VARS, vars);
  writeStatePartition(disk, images, {
    machine: "smoke-1",
    cluster: "smoke",
    kubeconfig: dummyKubeconfig(),
  });
  const serialLog = join(dir, "serial.log");
  const errFd = openSync(join(dir, "qemu.stderr"), "w");
  const args = qemuArgs({ disk, vars, serialLog, netdev: "user,id=n0,restrict=on" });
  const t0 = Date.now();
  const child = spawn("timeout", ["--kill-after=10", "900", "qemu-system-x86_64", ...args], {
    stdio: ["ignore", "ignore", errFd],
  });
  closeSync(errFd);
  const onExit = (): void => {
    if (child.pid !== undefined && child.exitCode === null) process.kill(child.pid, "SIGTERM");
  };
  process.once("exit", onExit);
  const s = (): number => (Date.now() - t0) / 1000;
  const check = (): void => {
    const bad = BAD.exec(serial(serialLog));
    if (bad !== null) throw new Error(`smoke boot: the serial console says: ${bad[0]} (${serialLog})`);
    if (child.exitCode !== null) throw new Error(`smoke boot: QEMU exited (${dir}/qemu.stderr)`);
  };
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
    // Serving: longer than WatchdogSec (30 s), so a missing WATCHDOG=1 would show as a restart.
    const serveMs = opts.serveMs ?? 45_000;
    const served = Date.now();
    await until("end of the serving watch", serveMs + 5000, () => {
      check();
      const boots = [...serial(serialLog).matchAll(BOOT)].length;
      if (boots > 1) throw new Error(`smoke boot: the machine rebooted (${serialLog})`);
      return Date.now() - served >= serveMs ? true : undefined;
    });
    const text = serial(serialLog);
    const agentLines = text.split("\n").filter((l) => /liken-agent|liken\[\d+\]: /.test(l));
    return {
      bootloader: images.bootloader,
      initrdSeconds,
      agentReadySeconds,
      firstAgentLogSeconds,
      servedSeconds: (Date.now() - served) / 1000,
      serialLog,
      agentLines,
    };
  } finally {
    await stop(child);
    process.removeListener("exit", onExit);
    if (opts.keep !== true) rmSync(disk, { force: true });
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
