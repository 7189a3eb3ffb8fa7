// The machine scenario's check that every boot ran its own release's initrd: read off the
// console's LIKEN-INITRD lines. On systemd-boot, a trial that ran the old initrd means the agent
// did not put the release's kernel and initrd on the ESP.
import { describe, expect, it } from "vitest";
import { parseBoots, type ConsoleLine } from "../qemu/machine-console.js";
import { initrdChecks } from "../qemu/machine-phases.js";

const at = (ms: number, text: string): ConsoleLine => ({ ms, text });
const boot = (ms: number, initrd: string | null, slot: string, version: string, trial: 0 | 1) => [
  at(ms, 'BdsDxe: starting Boot0001 "UEFI Misc Device"'),
  ...(initrd === null ? [] : [at(ms + 1, `LIKEN-INITRD version=${initrd}`)]),
  at(ms + 2, `LIKEN-BOOT slot=${slot} version=${version} trial=${trial}`),
];

function check(lines: ConsoleLine[]): { problems: string[]; said: string[] } {
  const c = { problems: [] as string[], said: [] as string[] };
  initrdChecks(
    { problems: c.problems, say: (l) => c.said.push(l) },
    parseBoots(lines, () => undefined),
  );
  return c;
}

describe("the initrd each boot ran", () => {
  it("passes when every boot ran its own release's initrd, and prints the trials' lines", () => {
    const c = check([...boot(0, "v1", "a", "v1", 0), ...boot(100, "v2", "b", "v2", 1)]);
    expect(c.problems).toEqual([]);
    expect(c.said).toEqual(["boot 2 (slot b v2) console: LIKEN-INITRD version=v2"]);
  });

  it("fails a trial that ran the previous release's initrd (nothing installed on the ESP)", () => {
    const c = check([...boot(0, "v1", "a", "v1", 0), ...boot(100, "v1", "b", "v2", 1)]);
    expect(c.problems).toEqual([
      "boot 2 (slot b v2) ran the initrd of v1: LIKEN-INITRD version=v1",
    ]);
  });

  it("fails a boot whose initrd did not say", () => {
    const c = check(boot(0, null, "a", "v1", 0));
    expect(c.problems).toEqual(["boot 1 (slot a v1) printed no LIKEN-INITRD line"]);
  });
});
