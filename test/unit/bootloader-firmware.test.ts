// The firmware model on the testbed's scenarios: the same expectations the QEMU tier checks on
// the real firmware and bootloader (test/qemu/testbed.test.ts compares the two boot by boot).
import { describe, expect, it } from "vitest";
import { MemoryEnvStore } from "../../src/bootloader/envstore.js";
import { bootMachine, grubBoot } from "../../src/bootloader/firmware.js";
import { GrubBootloader, initialEnvBlock } from "../../src/bootloader/grub.js";
import { judgeBoot } from "../../src/bootloader/types.js";
import { trialNotTaken } from "../../src/agent/steps.js";
import { formatBoot, runOnModel, SCENARIO_NAMES, SCENARIOS } from "../qemu/scenarios.js";
import { checkRun, type QemuRun } from "../qemu/testbed.js";

describe("firmware model on the testbed scenarios", () => {
  it.each(SCENARIO_NAMES.map((n) => [n]))("%s", async (name) => {
    const s = SCENARIOS[name];
    const run = await runOnModel(s);
    expect(run.boots.map((b, i) => formatBoot(i + 1, b))).toEqual(
      s.expected.map((b, i) => formatBoot(i + 1, b)),
    );
    expect(run.finalVerdict).toBe(s.finalVerdict);
  });

  it("prints the boot lines the testbed prints", () => {
    expect(SCENARIOS.good.expected.map((b, i) => formatBoot(i + 1, b))).toEqual([
      "boot 1: slot a 2026.10.10-001",
      "boot 2: slot b 2026.10.12-001 (trial)",
      "boot 3: slot b 2026.10.12-001",
    ]);
  });

  it("a trial boots once: every later boot after a failure is the default", async () => {
    const init = initialEnvBlock("a");
    const store = new MemoryEnvStore([Buffer.from(init), Buffer.from(init)]);
    await new GrubBootloader(store).armTrial("b");
    const boots = [];
    for (let i = 0; i < 4; i++) boots.push(await bootMachine(store, { b: "hang" }));
    expect(boots.map((b) => `${b.slot}${b.trial ? "*" : ""}:${b.outcome}`)).toEqual([
      "b*:hung",
      "a:up",
      "a:up",
      "a:up",
    ]);
  });

  it("a GRUB that cannot record the trial start boots the default and leaves next_entry armed", async () => {
    const init = initialEnvBlock("a");
    const store = new MemoryEnvStore([Buffer.from(init), Buffer.from(init)]);
    const bl = new GrubBootloader(store);
    await bl.armTrial("b");
    const quirks = { ignoreOneShot: true };
    const boot = await bootMachine(store, { b: "panic" }, quirks);
    expect(boot).toMatchObject({ slot: "a", trial: false, outcome: "up" });
    expect(boot.log).toBe("liken-grub: env=.../grubenv default=a boot=normal");
    const r = await bl.read();
    expect(r).toMatchObject({ defaultSlot: "a", armed: "b", started: null });
    expect(r.shows).toMatch(/saved_entry=a next_entry=b liken_trial=$/);
    // The agent's rule reads it as not taken in a later boot; a trial GRUB started, not.
    const later = {
      bootId: "boot-2",
      armedTrial: { slot: "b" as const, bootId: "boot-1", shown: true },
    };
    expect(trialNotTaken({ boot: judgeBoot(r, "a"), ...later })).toBe("b");
    const started = new MemoryEnvStore([Buffer.from(init), Buffer.from(init)]);
    await new GrubBootloader(started).armTrial("b");
    await bootMachine(started, { b: "panic" });
    await bootMachine(started, {});
    const fellBack = judgeBoot(await new GrubBootloader(started).read(), "a");
    expect(fellBack.kind).toBe("trial-failed");
    expect(trialNotTaken({ boot: fellBack, ...later })).toBeNull();
    // Disarmed, no later boot takes the trial, whatever the bootloader then does.
    await bl.disarm();
    expect(await grubBoot(store)).toMatchObject({ slot: "a", trial: false });
    expect(await bl.read()).toMatchObject({ defaultSlot: "a", armed: null, started: null });
  });

  it("logs the decision as grub.cfg echoes it", async () => {
    const init = initialEnvBlock("a");
    const store = new MemoryEnvStore([Buffer.from(init), Buffer.from(init)]);
    expect((await grubBoot(store)).log).toBe("liken-grub: env=.../grubenv default=a boot=normal");
    await new GrubBootloader(store).armTrial("b");
    expect((await grubBoot(store)).log).toBe(
      "liken-grub: env=.../grubenv default=trial-b boot=trial",
    );
  });
});

describe("the testbed's checker", () => {
  async function modelAsRun(name: (typeof SCENARIO_NAMES)[number]): Promise<QemuRun> {
    const m = await runOnModel(SCENARIOS[name]);
    return {
      name,
      boots: m.boots,
      grubLogs: m.grubLogs,
      finalVerdict: m.finalVerdict,
      envCopies: [m.store.copies[0], m.store.copies[1]],
      seconds: 0,
      dir: "/nonexistent",
      problems: [],
    };
  }

  it("accepts a run that boots, decides and leaves bytes as the model does", async () => {
    for (const n of SCENARIO_NAMES) expect(await checkRun(await modelAsRun(n))).toEqual([]);
  });

  it("rejects another boot sequence, another GRUB decision or other env bytes", async () => {
    const seq = await modelAsRun("good");
    seq.boots[2] = { ...SCENARIOS.panic.expected[2]! };
    expect((await checkRun(seq)).join("\n")).toMatch(/boots were .* expected/);

    const grub = await modelAsRun("panic");
    grub.grubLogs[1] = "liken-grub: env=.../grubenv2 default=trial-b boot=trial";
    expect((await checkRun(grub)).join("\n")).toMatch(/GRUB decided/);

    const bytes = await modelAsRun("hang");
    bytes.envCopies[1] = initialEnvBlock("a");
    expect((await checkRun(bytes)).join("\n")).toMatch(/env copy 1 differs/);

    const verdict = await modelAsRun("no-confirm");
    verdict.finalVerdict = "steady";
    expect((await checkRun(verdict)).join("\n")).toMatch(/last verdict/);
  });
});
