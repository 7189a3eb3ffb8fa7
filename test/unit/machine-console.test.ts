// Reading the machine guest's boots off its console: lines as the real guest printed them
// (OVMF, the initrd's LIKEN-BOOT, systemd, the agent's JSON log on the console).
import { describe, expect, it } from "vitest";
import { agentMessages, parseBoots, type ConsoleLine } from "../qemu/machine-console.js";

const at = (ms: number, text: string): ConsoleLine => ({ ms, text });

const BOOT1 = [
  at(1000, 'BdsDxe: loading Boot0001 "UEFI Misc Device" from PciRoot(0x0)/Pci(0x3,0x0)'),
  at(1000, 'BdsDxe: starting Boot0001 "UEFI Misc Device" from PciRoot(0x0)/Pci(0x3,0x0)'),
  at(9000, "LIKEN-BOOT slot=a version=2026.12.01-001 trial=0"),
  at(9500, "Welcome to LIKEN 2026.12.01-001 (Debian trixie)!"),
  at(30000, "         Starting liken-agent.service - lik…akes reboot turns, proves trials..."),
  // An escape sequence cut across two reads of the console leaves this behind.
  at(
    41000,
    "[  OK  ] Started [0;1;39mliken-agent.service - like takes reboot turns, proves trials.",
  ),
];

describe("parseBoots", () => {
  it("reads slot, version, trial and the agent's READY=1 of each boot", () => {
    const boots = parseBoots(
      [
        ...BOOT1,
        at(90000, 'BdsDxe: starting Boot0001 "UEFI Misc Device"'),
        at(95000, "liken-grub: booting trial-b"),
        at(99000, "LIKEN-BOOT slot=b version=2026.12.01-002 trial=1"),
        at(140000, "[  OK  ] Started liken-agent.service - liken agent."),
      ],
      () => undefined,
    );
    expect(boots.map((b) => [b.line, b.atMs, b.readyMs])).toEqual([
      [{ slot: "a", version: "2026.12.01-001", trial: false }, 1000, 41000],
      [{ slot: "b", version: "2026.12.01-002", trial: true }, 90000, 140000],
    ]);
    expect(boots[0]!.agentLines).toHaveLength(2);
  });

  it("takes a boot that died before its initrd spoke from the bootloader, the version from the host", () => {
    const boots = parseBoots(
      [
        ...BOOT1,
        at(90000, 'BdsDxe: starting Boot0001 "UEFI Misc Device"'),
        at(95000, "liken-grub: booting trial-b"),
        at(96000, "Kernel panic - not syncing: VFS: Unable to mount root fs"),
      ],
      (slot, i) => (slot === "b" && i === 1 ? "v-from-host" : undefined),
    );
    expect(boots[1]).toMatchObject({
      line: { slot: "b", version: "v-from-host", trial: true },
      panicked: true,
    });
    expect(boots[1]!.readyMs).toBeUndefined();
  });

  it("sees no boot before the firmware starts one", () => {
    expect(parseBoots([at(1, "LIKEN-BOOT slot=a version=x trial=0")], () => undefined)).toEqual([]);
  });
});

describe("agentMessages", () => {
  it("keeps each message once, with its error, from the agent's JSON lines only", () => {
    const line = (t: number, msg: string, err?: string): string =>
      `[   45.3] liken[244]: ${JSON.stringify({ level: 40, time: t, msg, ...(err ? { err } : {}) })}`;
    expect(
      agentMessages(
        [
          line(1, "heartbeat not renewed", "no answer from the API server"),
          "[  OK  ] Started something.",
          line(2, "heartbeat not renewed", "no answer from the API server"),
          line(3, "drain resumed"),
          line(9, "late"),
          '{"level":30,"time":4,"msg":"cut off mid',
        ],
        (t) => t < 5,
      ),
    ).toEqual(["heartbeat not renewed: no answer from the API server", "drain resumed"]);
  });
});
