// The Machine's default name (src/agent/machine-name.ts): hostname or DMI serial, as a table.
import { describe, expect, it } from "vitest";
import {
  nameOfSerial,
  resolveMachineName,
  type MachineFrom,
} from "../../src/agent/machine-name.js";

const F = "/etc/liken/agent.yaml";

describe("the machine's default name", () => {
  const rows: [string, string, string | undefined, MachineFrom, string | RegExp][] = [
    ["a hostname", "node-7", "S1", "hostname", "node-7"],
    ["an upper-case hostname, lowered", "Node-7", "S1", "hostname", "node-7"],
    ["localhost: the serial", "localhost", "PF3ABC12", "hostname", "pf3abc12"],
    ["an empty hostname: the serial", "", "PF3ABC12", "hostname", "pf3abc12"],
    ["the serial first when asked", "node-7", "PF3ABC12", "dmi-serial", "pf3abc12"],
    ["a placeholder serial: the hostname", "node-7", "Default string", "dmi-serial", "node-7"],
    [
      "a serial with spaces and slashes",
      "localhost",
      " VMware-56 4d/aa ",
      "hostname",
      "vmware-56-4d-aa",
    ],
    ["neither", "localhost", "To Be Filled By O.E.M.", "hostname", /no machine name/],
    ["no DMI at all", "localhost", undefined, "hostname", /cannot be read/],
    [
      "a hostname that is no name (underscore)",
      "my_host",
      undefined,
      "hostname",
      /not a valid name/,
    ],
  ];
  it.each(rows)("%s", (_what, hostname, serial, prefer, want) => {
    const go = () => resolveMachineName({ hostname, serial }, prefer, F).machine;
    if (typeof want === "string") expect(go()).toBe(want);
    else expect(go).toThrow(want);
  });

  it("a serial becomes a Kubernetes name", () => {
    expect(nameOfSerial("..AB__CD..")).toBe("ab-cd");
    expect(nameOfSerial("x".repeat(300))).toHaveLength(253);
  });
});
