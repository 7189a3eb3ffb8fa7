// The machine image's /etc/liken/agent.yaml (testbed/machine/state.ts) is read by the agent's
// own config loader: a field the agent does not take, or a missing one, fails here, not on a
// booted guest.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/agent/config.js";
import { agentConfigYaml } from "../../testbed/machine/state.js";
import type { MachineBootloader } from "../../testbed/machine/contract.js";

const dir = mkdtempSync(path.join(tmpdir(), "liken-machine-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const identity = { machine: "node-7", cluster: "lab", kubeconfig: "(not read here)" };

async function load(bootloader: MachineBootloader) {
  const file = path.join(dir, `${bootloader}.yaml`);
  writeFileSync(file, agentConfigYaml(identity, bootloader));
  return loadConfig(file);
}

describe("the machine's agent.yaml", () => {
  it.each([
    ["grub", { backend: "grub", envDir: "/boot/efi/EFI/liken" }],
    [
      "systemd-boot",
      { backend: "systemd-boot", esp: "/boot/efi", efivars: "/sys/firmware/efi/efivars" },
    ],
  ] as const)(
    "names the %s backend, the slots by partition label and a real reboot",
    async (b, bl) => {
      const c = await load(b);
      expect(c.bootloader).toEqual(bl);
      expect(c.slots.slots).toEqual({
        a: { device: "/dev/disk/by-partlabel/liken-a" },
        b: { device: "/dev/disk/by-partlabel/liken-b" },
      });
      expect(c.slots.stateDir).toBe("/var/lib/liken");
      expect(c.machine).toBe("node-7");
      expect(c.cluster).toBe("lab");
      expect(c.kubeconfig).toBe("/etc/liken/kubeconfig");
      expect(c.reboot).toEqual({ command: ["systemctl", "reboot"] });
      expect(c.direct).toBe(true);
      expect(c.cmdline).toBe("/proc/cmdline");
    },
  );
});

describe("the machine's agent.yaml with the bootstrap credential", () => {
  it("joins with /etc/liken/bootstrap-kubeconfig and writes its own kubeconfig on the state partition", async () => {
    const file = path.join(dir, "bootstrap.yaml");
    writeFileSync(file, agentConfigYaml({ ...identity, bootstrap: true }, "grub"));
    const c = await loadConfig(file);
    expect(c.kubeconfig).toBe("/var/lib/liken/identity/kubeconfig");
    expect(c.identity).toMatchObject({
      kubeconfig: "/var/lib/liken/identity/kubeconfig",
      bootstrapKubeconfig: "/etc/liken/bootstrap-kubeconfig",
    });
  });
});
