// The lab machines' service gate and the lab's clock. Every lab machine runs one host check
// (agent.yaml health.commands, `command service`), on its trial boot and, while
// spec.rollout.revert watches the release, again after promotion. It stands for the check a
// fleet runs on its own service (a NIC under load, a filesystem): it passes, except on a
// release whose kernel says `bad-after-promotion` (releases.ts) once that boot is an hour old
// on the lab's clock. The lab's clock is the wall clock plus an offset kept in a file, so
// `npm run lab -- clock 1h` makes "an hour later" now without touching any other clock: the
// agents, the operator and the API server keep the real time.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { HealthCommand } from "../agent/health.js";
import { LikenError } from "../errors.js";
import { LAB_RUN_DIR } from "./paths.js";

/** Seconds the lab's clock runs ahead of the wall clock (absent: 0). */
export const LAB_CLOCK_FILE = path.join(LAB_RUN_DIR, "clock-offset-seconds");
/** How long after its boot a bad-after-promotion release's service goes bad: the hour. */
export const BAD_AFTER_SECONDS = 3600;
/** The gate's name as the agent reports it (gateNames: `command <name>`). */
export const LAB_SERVICE_GATE = "command service";

/**
 * The gate of the machine in `dir` (machine.ts: cmdline names the booted slot, boot_id's
 * mtime is the boot's start, slot-<s>.img begins with the lab kernel's header).
 */
export function labServiceGate(dir: string, clockFile = LAB_CLOCK_FILE): HealthCommand {
  const q = (p: string): string => `'${p.replaceAll("'", "'\\''")}'`;
  const script = [
    `slot=$(sed -n 's/.*liken\\.slot=\\([ab]\\).*/\\1/p' ${q(path.join(dir, "cmdline"))})`,
    `head -c 256 ${q(dir)}/slot-$slot.img | grep -q '^behaviour: bad-after-promotion$' || exit 0`,
    `offset=$(cat ${q(clockFile)} 2>/dev/null || echo 0)`,
    `up=$(( $(date +%s) + offset - $(stat -c %Y ${q(path.join(dir, "boot_id"))}) ))`,
    `[ "$up" -lt ${BAD_AFTER_SECONDS} ] && exit 0`,
    `echo "service: packets dropped under load, $up s after this boot on the lab's clock"`,
    "exit 1",
  ].join("\n");
  return { name: "service", command: ["sh", "-c", script], timeoutSeconds: 10 };
}

/** The lab clock's offset from the wall clock, seconds. */
export function labClockOffset(clockFile = LAB_CLOCK_FILE): number {
  try {
    return Number(readFileSync(clockFile, "utf8").trim()) || 0;
  } catch {
    return 0;
  }
}

/** Moves the lab's clock `seconds` on (never back: "later" only). Returns the new offset. */
export function moveLabClock(seconds: number, clockFile = LAB_CLOCK_FILE): number {
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new LikenError(
      "LIKEN_LAB_USAGE",
      `the lab's clock moves forward only: got ${seconds} s; give a positive duration, e.g. 1h`,
    );
  }
  const next = labClockOffset(clockFile) + Math.round(seconds);
  writeFileSync(clockFile, `${next}\n`);
  return next;
}
