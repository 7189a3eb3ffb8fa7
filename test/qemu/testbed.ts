// The QEMU A/B testbed: boots the image of testbed/build.ts under OVMF + GRUB + Debian's kernel
// (TCG, no KVM), arms the trial with liken's GRUB backend writing the environment block into the
// disk image, and reads the boot sequence off the serial console. Each scenario also runs on the
// firmware model, which must give the same boots, the same GRUB decisions and the same bytes.
//
//   npm run testbed -- --scenario good|panic|hang|no-confirm|all [--keep]
//   npm run testbed -- --scenario machine --bootloader grub|systemd-boot (machine.ts)
import {
  copyFileSync,
  mkdtempSync,
  openSync,
  closeSync,
  readSync,
  statSync,
  writeSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { accelerator, acceleratorLine } from "../../testbed/accelerator.js";
import { buildTestbed, type Manifest } from "../../testbed/build.js";
import { OVMF_VARS } from "../../testbed/qemu.js";
import { ImageEnvStore } from "../../src/bootloader/envstore.js";
import { GrubBootloader } from "../../src/bootloader/grub.js";
import type { BootVerdict, Slot } from "../../src/bootloader/types.js";
import {
  agentOnUp,
  formatBoot,
  runOnModel,
  SCENARIO_NAMES,
  SCENARIOS,
  type BootLine,
  type ScenarioName,
} from "./scenarios.js";
import { PoweredQemu } from "./powered.js";
import type { SerialConsole } from "./serial.js";

/**
 * One boot takes 13-22 s under TCG on this machine when it is quiet, and 60 s when it runs a
 * load of 10+ (measured 2026-12-02): the deadline leaves room for the loaded case.
 */
const BOOT_TIMEOUT_MS = 240_000;

export interface QemuRun {
  name: ScenarioName;
  boots: BootLine[];
  grubLogs: string[];
  finalVerdict: BootVerdict["kind"] | "none";
  envCopies: [Buffer | null, Buffer | null];
  seconds: number;
  dir: string;
  problems: string[];
}

/** Upper bound of one QEMU's life: `timeout` ends it even if this process dies by SIGKILL. */
const QEMU_LIFETIME_S = 1200;

/** Writes slot B's filesystem into its partition: the agent's job, done here by the harness. */
function installSlot(disk: string, part: { offset: number; size: number }, image: string): void {
  // Piece by piece: a slot image may be larger than a Buffer holds (a 4 GiB slot is).
  if (statSync(image).size > part.size) throw new Error(`${image} is larger than its partition`);
  const piece = Buffer.alloc(1024 * 1024);
  const src = openSync(image, "r");
  const fd = openSync(disk, "r+");
  try {
    for (let at = 0, n; (n = readSync(src, piece, 0, piece.length, at)) > 0; at += n)
      writeSync(fd, piece, 0, n, part.offset + at);
  } finally {
    closeSync(fd);
    closeSync(src);
  }
}

const GRUB_RE = /liken-grub: env=(\S*) default=(\S+) boot=(\w+)/g;
const GRUB_BOOTING = /liken-grub: booting (trial-)?([ab])\b/;
const OS_BOOT = /LIKEN-BOOT slot=([ab]) version=(\S+) trial=([01])|liken-grub: booting/;
const OS_STATE = /LIKEN-(UP|FAULT|ERROR)|liken-grub: booting/;

/** The last GRUB decision printed in `text`, in the firmware model's words. */
function grubDecision(text: string): string {
  let last: RegExpExecArray | null = null;
  for (const m of text.matchAll(GRUB_RE)) last = m;
  if (last === null) return "(GRUB printed no decision)";
  const file = (last[1] ?? "").split("/").pop() ?? "";
  return `liken-grub: env=${file === "" ? "" : `.../${file}`} default=${last[2]} boot=${last[3]}`;
}

interface ObservedBoot {
  line: BootLine;
  grubLog: string;
  /** The OS came up (LIKEN-UP); false when it faulted or died before its init reported. */
  up: boolean;
  cursor: number;
}

/**
 * One boot on the console, from GRUB's choice of entry to the OS being up or gone. A boot that
 * dies before the init reports (a kernel panic at start) still counts, with no version.
 */
async function observeBoot(serial: SerialConsole, from: number, n: number): Promise<ObservedBoot> {
  const g = await serial.waitFor(GRUB_BOOTING, from, BOOT_TIMEOUT_MS, `GRUB starting boot ${n}`);
  const grubLog = grubDecision(serial.text.slice(from, g.match.index));
  const slot = g.match[2] as Slot;
  const trial = g.match[1] !== undefined;
  const os = await serial.waitFor(OS_BOOT, g.end, BOOT_TIMEOUT_MS, `the OS of boot ${n}`);
  if (os.match[1] === undefined) {
    const line = { slot, version: "(died before its init ran)", trial };
    return { line, grubLog, up: false, cursor: os.match.index };
  }
  const line: BootLine = {
    slot: os.match[1] as Slot,
    version: os.match[2] ?? "",
    trial: os.match[3] === "1",
  };
  if (line.slot !== slot || line.trial !== trial) {
    throw new Error(`boot ${n}: GRUB booted ${g.match[0]} but the OS says ${os.match[0]}`);
  }
  const st = await serial.waitFor(OS_STATE, os.end, BOOT_TIMEOUT_MS, `boot ${n} coming up`);
  if (st.match[1] === "ERROR") {
    throw new Error(`boot ${n}: ${serial.text.slice(st.match.index).split("\n")[0]}`);
  }
  const up = st.match[1] === "UP";
  return { line, grubLog, up, cursor: st.match[1] === undefined ? st.match.index : st.end };
}

export async function runOnQemu(
  name: ScenarioName,
  m: Manifest,
  out: (line: string) => void,
): Promise<QemuRun> {
  const s = SCENARIOS[name];
  const t0 = Date.now();
  const dir = mkdtempSync(join(tmpdir(), `liken-testbed-${name}-`));
  const disk = join(dir, "disk.img");
  copyFileSync(m.disk, disk);
  installSlot(disk, m.parts.b, m.slotB[s.variant]);
  const vars = join(dir, "OVMF_VARS.fd");
  copyFileSync(OVMF_VARS, vars);
  const store = new ImageEnvStore(disk, m.envOffsets);
  const bl = new GrubBootloader(store);
  const run: QemuRun = {
    name,
    boots: [],
    grubLogs: [],
    finalVerdict: "none",
    envCopies: [null, null],
    seconds: 0,
    dir,
    problems: [],
  };
  let qemu: PoweredQemu | null = null;
  let serial: SerialConsole | null = null;
  try {
    qemu = await PoweredQemu.start({
      dir,
      disk,
      vars,
      serialSocket: join(dir, "serial.sock"),
      serialLog: join(dir, "serial.log"),
      lifetimeSeconds: QEMU_LIFETIME_S,
    });
    serial = qemu.serial;
    let cursor = 0;
    for (let n = 1; n <= s.expected.length; n++) {
      const boot = await observeBoot(serial, cursor, n);
      run.boots.push(boot.line);
      run.grubLogs.push(boot.grubLog);
      out(`${formatBoot(n, boot.line)}  [${((Date.now() - t0) / 1000).toFixed(1)} s]`);
      cursor = boot.cursor;
      if (!boot.up) continue; // panic= or the watchdog resets it by itself
      const { verdict, action } = await agentOnUp(bl, boot.line.slot, n, s.rejoins);
      run.finalVerdict = verdict.kind;
      if (action === "done") break;
      if (action === "wait") continue; // the trial's deadline stops the watchdog's feeding
      if (verdict.kind === "on-trial") {
        serial.send("confirmed");
        cursor = (await serial.waitFor(/LIKEN-CONFIRMED/, cursor, 30_000, "the confirmation")).end;
      }
      serial.send("reboot");
    }
  } catch (e) {
    run.problems.push((e as Error).message);
  } finally {
    if (serial !== null) {
      const tl = serial.timeline.map((e) => `${(e.ms / 1000).toFixed(1).padStart(7)} s  ${e.line}`);
      writeFileSync(join(dir, "timeline.txt"), `${tl.join("\n")}\n`);
    }
    await qemu?.stop();
  }
  run.envCopies = [await store.read(0), await store.read(1)];
  run.seconds = (Date.now() - t0) / 1000;
  return run;
}

/** Everything that must agree: the expected sequence, the firmware model, the bytes. */
export async function checkRun(run: QemuRun): Promise<string[]> {
  const s = SCENARIOS[run.name];
  const model = await runOnModel(s);
  const problems = [...run.problems];
  const fmt = (ls: BootLine[]): string => ls.map((l, i) => formatBoot(i + 1, l)).join("; ");
  if (fmt(run.boots) !== fmt(s.expected)) {
    problems.push(`boots were [${fmt(run.boots)}], expected [${fmt(s.expected)}]`);
  }
  if (fmt(model.boots) !== fmt(run.boots)) {
    problems.push(`the firmware model booted [${fmt(model.boots)}], QEMU [${fmt(run.boots)}]`);
  }
  if (model.grubLogs.join("\n") !== run.grubLogs.join("\n")) {
    problems.push(
      `GRUB decided\n  ${run.grubLogs.join("\n  ")}\nthe model\n  ${model.grubLogs.join("\n  ")}`,
    );
  }
  if (run.finalVerdict !== s.finalVerdict || model.finalVerdict !== s.finalVerdict) {
    problems.push(
      `last verdict: QEMU ${run.finalVerdict}, model ${model.finalVerdict}, expected ${s.finalVerdict}`,
    );
  }
  for (const c of [0, 1] as const) {
    const q = run.envCopies[c];
    const mc = model.store.copies[c];
    if (q === null || mc === null || !q.equals(mc)) {
      problems.push(
        `env copy ${c} differs between the disk and the model:\n${q?.toString("latin1").replace(/#+$/, "")}\n---\n${mc?.toString("latin1").replace(/#+$/, "")}`,
      );
    }
  }
  return problems;
}

function parseArgs(argv: string[]): ScenarioName[] {
  const i = argv.indexOf("--scenario");
  const v = i >= 0 ? argv[i + 1] : "all";
  if (v === "all") return [...SCENARIO_NAMES];
  if (SCENARIO_NAMES.includes(v as ScenarioName)) return [v as ScenarioName];
  throw new Error(
    `--scenario must be one of ${SCENARIO_NAMES.join(", ")}, all or machine (got ${v})`,
  );
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  // The machine scenario (the agent itself in a systemd guest) has its own options.
  if (argv[argv.indexOf("--scenario") + 1] === "machine") {
    const { machineMain } = await import("./machine-main.js");
    return machineMain(argv);
  }
  const names = parseArgs(argv);
  // --keep: keep each run's directory (serial.log, timeline.txt, disk.img) even when it passed.
  const keep = process.argv.includes("--keep");
  const t0 = Date.now();
  const m = buildTestbed((s) => console.log(s));
  console.log(
    `testbed: image ${m.hash} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (disk ${m.sizes.disk} bytes)`,
  );
  let failed = 0;
  for (const name of names) {
    console.log(`scenario ${name}:`);
    const run = await runOnQemu(name, m, (l) => console.log(`  ${l}`));
    const problems = await checkRun(run);
    // Each scenario's last line names the accelerator, as the tier's do (testbed.test.ts).
    const accel = acceleratorLine(await accelerator());
    if (problems.length === 0) {
      if (keep) console.log(`  serial log and timeline kept in ${run.dir}`);
      else rmSync(run.dir, { recursive: true, force: true });
      console.log(`scenario ${name}: ok in ${run.seconds.toFixed(1)} s (model agrees); ${accel}`);
    } else {
      failed++;
      for (const p of problems) console.log(`  ${p}`);
      console.log(
        `scenario ${name}: FAILED in ${run.seconds.toFixed(1)} s; serial log in ${run.dir}; ${accel}`,
      );
    }
  }
  return failed === 0 ? 0 : 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (e: unknown) => {
      console.error(e);
      process.exit(2);
    },
  );
}
