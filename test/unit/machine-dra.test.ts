import { describe, expect, it } from "vitest";
import { driverLines } from "../qemu/machine-dra.js";
import { unpreparedAt } from "../qemu/dra-order.js";

const claim = "86e4c7cb-d60e-4f23-82b8-b5f10ec83b80";
const cri = `2026-12-04T20:58:01.5Z stderr F I1204 20:58:01.500000       1 kubeletplugin.go:479] "CDI file removed" path="/var/run/cdi/test-driver.liken.local-${claim}-dev.json"`;

describe("the DRA driver's lines on the serial console", () => {
  it("are the CRI lines after the mark, whatever systemd and the kernel put before it", () => {
    const console = [
      "[  132.66] kubelet[512]: I1204 something else",
      `[  301.12] dra-log[631]: LIKEN-DRA ${cri}`,
      "LIKEN-BOOT slot=b version=2026.12.01-002 trial=1",
    ];
    expect(driverLines(console)).toEqual([cri]);
    expect(unpreparedAt(driverLines(console), claim)).toBe(
      new Date("2026-12-04T20:58:01.5Z").getTime() / 1000,
    );
  });

  it("are none when the unit copied nothing", () => {
    expect(driverLines(["[  1.0] systemd[1]: Started kubelet.service"])).toEqual([]);
  });
});
