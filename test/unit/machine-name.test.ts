// The Machine's default name (src/agent/machine-name.ts): hostname or DMI serial, as a table.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/agent/config.js";
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

describe("the name found at the first start is kept", () => {
  it("on the state partition: a later start keeps it whatever the hostname says then", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-name-"));
    try {
      const file = path.join(dir, "agent.yaml");
      writeFileSync(
        file,
        "cluster: prod\nslots: { a: { device: a.img }, b: { device: b.img } }\nstateDir: .\n" +
          "bootloader: { backend: grub, envDir: . }\n",
      );
      const first = await loadConfig(file, () => ({ hostname: "localhost", serial: "SN-1" }));
      expect(first).toMatchObject({ machine: "sn-1", machineFrom: "dmi-serial" });
      expect(readFileSync(path.join(dir, "machine-name"), "utf8")).toBe("sn-1\n");
      // DHCP named the host since: the Machine (and its certificate) keep the first name.
      const later = await loadConfig(file, () => ({ hostname: "node-7", serial: "SN-1" }));
      expect(later).toMatchObject({ machine: "sn-1", machineFrom: "remembered", nodeName: "sn-1" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
