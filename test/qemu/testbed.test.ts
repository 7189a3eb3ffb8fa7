// The QEMU tier: every scenario boots the real firmware (OVMF), the real GRUB and Debian's
// kernel under TCG, with the trial armed and confirmed by liken's GRUB backend, and must give the
// expected boot sequence, the same sequence and bytes as the firmware model, and the agent's
// verdict. The image is built once (cached by a hash of its inputs, see testbed/build.ts).
import { rmSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { accelerator, acceleratorLine } from "../../testbed/accelerator.js";
import { buildTestbed, type Manifest } from "../../testbed/build.js";
import { SCENARIO_NAMES } from "./scenarios.js";
import { checkRun, runOnQemu } from "./testbed.js";

/**
 * Two guests at a time: each QEMU under TCG keeps one host core busy, and the machine has two.
 * Sequentially the four scenarios (12 boots) take twice as long.
 */
const PARALLEL_GUESTS = 2;

/**
 * A scenario's own time plus its wait for a guest slot (a test's timer starts when the
 * concurrent tests all start). The per-boot deadlines in testbed.ts catch a stuck guest sooner.
 */
const SCENARIO_TIMEOUT_MS = 1_200_000;

let slots = PARALLEL_GUESTS;
const queue: (() => void)[] = [];
async function withGuestSlot<T>(f: () => Promise<T>): Promise<T> {
  if (slots === 0) await new Promise<void>((r) => queue.push(r));
  else slots--;
  try {
    return await f();
  } finally {
    const next = queue.shift();
    if (next !== undefined) next();
    else slots++;
  }
}

let manifest: Manifest | null = null;
function image(): { m: Manifest; seconds: number } {
  const t0 = Date.now();
  manifest ??= buildTestbed((s) => console.log(s));
  return { m: manifest, seconds: (Date.now() - t0) / 1000 };
}

describe.concurrent("QEMU A/B testbed", () => {
  it.each(SCENARIO_NAMES.map((n) => [n]))(
    "scenario %s",
    async (name) => {
      const { m, seconds } = image();
      const run = await withGuestSlot(() =>
        runOnQemu(name, m, (l) => console.log(`[${name}] ${l}`)),
      );
      const problems = await checkRun(run);
      const ok = problems.length === 0;
      console.log(
        `[${name}] ${ok ? "ok" : "FAILED"} in ${run.seconds.toFixed(1)} s (image ready in ` +
          `${seconds.toFixed(1)} s)${ok ? "" : `; serial log: ${run.dir}/serial.log`}; ` +
          acceleratorLine(await accelerator()),
      );
      if (ok) rmSync(run.dir, { recursive: true, force: true });
      expect(problems).toEqual([]);
    },
    SCENARIO_TIMEOUT_MS,
  );
});
