import { describe, expect, it } from "vitest";
import { watchdogPeriodMs } from "../../src/agent/watchdog.js";

describe("watchdogPeriodMs", () => {
  it("feeds at half of WatchdogSec, at most every 5 s", () => {
    expect(watchdogPeriodMs({ WATCHDOG_USEC: "30000000" }, 1)).toBe(5_000);
    expect(watchdogPeriodMs({ WATCHDOG_USEC: "4000000" }, 1)).toBe(2_000);
    expect(watchdogPeriodMs({ WATCHDOG_USEC: "1000" }, 1)).toBe(1);
  });

  it("runs no timer where systemd does not watch this process", () => {
    expect(watchdogPeriodMs({}, 1)).toBeUndefined();
    expect(watchdogPeriodMs({ WATCHDOG_USEC: "0" }, 1)).toBeUndefined();
    expect(watchdogPeriodMs({ WATCHDOG_USEC: "soon" }, 1)).toBeUndefined();
  });

  it("honours WATCHDOG_PID: a child that inherited the variables is not the service", () => {
    expect(watchdogPeriodMs({ WATCHDOG_USEC: "30000000", WATCHDOG_PID: "7" }, 7)).toBe(5_000);
    expect(watchdogPeriodMs({ WATCHDOG_USEC: "30000000", WATCHDOG_PID: "7" }, 8)).toBeUndefined();
  });
});
