import { describe, expect, it } from "vitest";
import { parseAgentSection } from "../../src/agent/config.js";
import { DEFAULT_TIMEOUTS } from "../../src/agent/steps.js";
import { parseAgentConfig } from "../../src/slots/config.js";

const FILE = "/etc/liken/agent.yaml";
const BASE = `
machine: node-4
cluster: lab
slots: { a: { device: /dev/vda2 }, b: { device: /dev/vda3 } }
stateDir: /var/lib/liken
bootloader: { grubenvDir: /boot/efi/EFI/liken }
`;

function parse(extra: string) {
  const text = BASE + extra;
  return parseAgentSection(text, FILE, parseAgentConfig(text, FILE));
}

describe("agent config", () => {
  it("defaults", () => {
    const c = parse("");
    expect(c).toMatchObject({
      machine: "node-4",
      cluster: "lab",
      nodeName: "node-4",
      cmdline: "/proc/cmdline",
      grubenvDir: "/boot/efi/EFI/liken",
      reboot: { command: ["systemctl", "reboot"] },
      heartbeatMs: 10_000,
      loopMs: 5_000,
      direct: true,
      timeouts: DEFAULT_TIMEOUTS,
    });
    expect(c.kubeconfig).toBeUndefined();
    expect(c.metricsAddress).toBeUndefined();
  });

  it("reads every field, relative paths against the file's directory", () => {
    const c = parse(`
nodeName: n4
kubeconfig: kc
cmdline: ./cmdline
reboot: { exitCode: 194 }
heartbeatSeconds: 2
loopSeconds: 0.5
direct: false
timeouts: { proveMs: 8000, drainMs: 1000 }
metricsAddress: "127.0.0.1:9101"
`);
    expect(c).toMatchObject({
      nodeName: "n4",
      kubeconfig: "/etc/liken/kc",
      cmdline: "/etc/liken/cmdline",
      reboot: { exitCode: 194 },
      heartbeatMs: 2000,
      loopMs: 500,
      direct: false,
      metricsAddress: { host: "127.0.0.1", port: 9101 },
    });
    expect(c.timeouts).toEqual({ ...DEFAULT_TIMEOUTS, proveMs: 8000, drainMs: 1000 });
  });

  it.each([
    ["an unknown key", "machnie: x\n", /machnie is not a known field/],
    ["an unknown timeout", "timeouts: { proveMS: 1 }\n", /timeouts.proveMS is not a known timeout/],
    ["a zero timeout", "timeouts: { proveMs: 0 }\n", /timeouts.proveMs must be a positive number/],
    ["a reboot with neither", "reboot: {}\n", /reboot needs command/],
    ["an exit code of 1", "reboot: { exitCode: 1 }\n", /reboot needs command/],
    ["an empty reboot command", "reboot: { command: [] }\n", /reboot.command must be/],
    ["a string loop", "loopSeconds: fast\n", /loopSeconds must be a positive number/],
    [
      "a metrics port alone",
      "metricsAddress: 9101\n",
      /metricsAddress must be "host:port" or "off"/,
    ],
    [
      "a metrics URL",
      "metricsAddress: http://x:1\n",
      /metricsAddress metrics address .* is not host:port/,
    ],
  ])("refuses %s", (_name, extra, re) => {
    expect(() => parse(extra)).toThrow(re);
  });

  it("refuses a file without machine or bootloader", () => {
    const text = BASE.replace("machine: node-4\n", "");
    expect(() => parseAgentSection(text, FILE, parseAgentConfig(text, FILE))).toThrow(
      /machine must be a non-empty string/,
    );
    const t2 = BASE.replace("bootloader: { grubenvDir: /boot/efi/EFI/liken }\n", "");
    expect(() => parseAgentSection(t2, FILE, parseAgentConfig(t2, FILE))).toThrow(
      /bootloader.grubenvDir/,
    );
  });
});
