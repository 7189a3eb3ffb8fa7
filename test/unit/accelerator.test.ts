// The accelerator's choice (testbed/accelerator.ts): KVM only on a probe guest's evidence.
import { describe, expect, it } from "vitest";
import { decide, PROBE_LINE, probeBootSector } from "../../testbed/accelerator.js";

describe("the accelerator", () => {
  it.each([
    [{ forced: "tcg", kvmDevice: "opens" as const }, "tcg", "LIKEN_QEMU_ACCEL=tcg"],
    [
      { kvmDevice: "opens" as const, probe: { ran: true, said: "" } },
      "tcg",
      "the default; LIKEN_QEMU_ACCEL=kvm asks for KVM",
    ],
    [{ forced: "kvm", kvmDevice: "missing" as const }, "tcg", "no /dev/kvm on this host"],
    [{ forced: "kvm", kvmDevice: "denied" as const }, "tcg", "cannot open it read-write"],
    [
      {
        forced: "kvm",
        kvmDevice: "opens" as const,
        probe: { ran: false, said: "KVM internal error. Suberror: 1" },
      },
      "tcg",
      "/dev/kvm opens, but a probe guest did not run under KVM: KVM internal error. Suberror: 1",
    ],
    [
      { forced: "kvm", kvmDevice: "opens" as const, probe: { ran: true, said: "" } },
      "kvm",
      "a probe guest ran under KVM",
    ],
  ])("%j: %s", (seen, name, why) => {
    const a = decide(seen);
    expect(a.name).toBe(name);
    expect(a.why).toContain(why);
  });

  it("the probe's boot sector: a BIOS boot signature, and its line where the code reads it", () => {
    const s = probeBootSector();
    expect(s).toHaveLength(512);
    expect(s.readUInt16LE(510)).toBe(0xaa55);
    // mov si, imm16 at offset 9 names the message's address (loaded at 0x7c00).
    const msg = s.readUInt16LE(10) - 0x7c00;
    expect(s.toString("latin1", msg, msg + PROBE_LINE.length)).toBe(PROBE_LINE);
  });
});
