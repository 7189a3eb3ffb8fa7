import { describe, expect, it } from "vitest";
import { drainOptions } from "../../src/agent/act.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadConfig, parseAgentSection } from "../../src/agent/config.js";
import { DEFAULT_TIMEOUTS } from "../../src/agent/steps.js";
import { parseAgentConfig } from "../../src/slots/config.js";

const FILE = "/etc/liken/agent.yaml";
const BASE = `
machine: node-4
cluster: lab
slots: { a: { device: /dev/vda2 }, b: { device: /dev/vda3 } }
stateDir: /var/lib/liken
bootloader: { backend: grub, envDir: /boot/efi/EFI/liken }
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
      bootloader: { backend: "grub", envDir: "/boot/efi/EFI/liken" },
      driverPods: {},
      reboot: { command: ["systemctl", "reboot"] },
      heartbeatMs: 10_000,
      loopMs: 5_000,
      direct: true,
      timeouts: DEFAULT_TIMEOUTS,
      peersAddress: { port: 7450 },
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
peersAddress: "10.0.0.7:7451"
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
      peersAddress: { host: "10.0.0.7", port: 7451 },
    });
    expect(c.timeouts).toEqual({ ...DEFAULT_TIMEOUTS, proveMs: 8000, drainMs: 1000 });
  });

  it("peersAddress off: this machine never serves peers", () => {
    expect(parse('peersAddress: "off"\n').peersAddress).toBeUndefined();
  });

  it.each([
    ["an unknown key", "machnie: x\n", /machnie is not a known field/],
    ["an unknown timeout", "timeouts: { proveMS: 1 }\n", /timeouts.proveMS is not a known timeout/],
    ["a zero timeout", "timeouts: { proveMs: 0 }\n", /timeouts.proveMs must be a positive number/],
    ["a reboot with neither", "reboot: {}\n", /reboot needs command/],
    [
      "an exit code of 1",
      "reboot: { exitCode: 1 }\n",
      /reboot\.exitCode must be an integer from 2 to 254 \(got 1\)/,
    ],
    ["an empty reboot command", "reboot: { command: [] }\n", /reboot.command must be/],
    ["a string loop", "loopSeconds: fast\n", /loopSeconds must be a positive number/],
    [
      "a heartbeat slower than the Lost threshold allows",
      "heartbeatSeconds: 40\n",
      /heartbeatSeconds must be between 1 and 10: the operator reads a machine Lost after 40 s/,
    ],
    ["a heartbeat just past a quarter of 40 s", "heartbeatSeconds: 10.5\n", /between 1 and 10/],
    ["a heartbeat ten times a second", "heartbeatSeconds: 0.1\n", /between 1 and 10/],
    ["a loop of an hour", "loopSeconds: 3600\n", /loopSeconds must be between 0.1 and 60/],
    ["a loop that spins", "loopSeconds: 0.01\n", /loopSeconds must be between 0.1 and 60/],
    [
      "a timeout past Node's timer limit (it would fire at once)",
      "timeouts: { drainMs: 2147483648 }\n",
      /timeouts.drainMs must be between 1000 and 2147483647: milliseconds; Node fires a longer timer at once/,
    ],
    [
      "a timeout given in seconds by mistake",
      "timeouts: { proveMs: 900 }\n",
      /timeouts.proveMs must be between 1000 and 2147483647/,
    ],
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
    [
      "a peers port alone",
      "peersAddress: 7450\n",
      /peersAddress must be "host:port", ":port" or "off"/,
    ],
    [
      "a peers URL",
      "peersAddress: http://x:1\n",
      /peersAddress "http:\/\/x:1" is not "host:port", ":port" or "off" \(e\.g\. ":7450"\)/,
    ],
  ])("refuses %s", (_name, extra, re) => {
    expect(() => parse(extra)).toThrow(re);
  });

  it("accepts every bound itself", () => {
    const c = parse(`
heartbeatSeconds: 10
loopSeconds: 60
timeouts: { drainMs: 2147483647, proveMs: 1000 }
`);
    expect(c).toMatchObject({ heartbeatMs: 10_000, loopMs: 60_000 });
    expect(c.timeouts).toMatchObject({ drainMs: 2 ** 31 - 1, proveMs: 1000 });
    expect(parse("heartbeatSeconds: 1\nloopSeconds: 0.1\n")).toMatchObject({
      heartbeatMs: 1000,
      loopMs: 100,
    });
  });

  it("names every problem of the file in one refusal, the slot keys' and the rest's", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "liken-agent-config-"));
    try {
      const file = path.join(dir, "agent.yaml");
      // A slot problem (b's device missing) and two agent problems (a typo, a bad timeout).
      writeFileSync(
        file,
        BASE.replace("b: { device: /dev/vda3 }", "b: {}") +
          "heartbeatSecond: 10\ntimeouts: { proveMs: 900 }\n",
      );
      const err = await loadConfig(file).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "LIKEN_AGENT_CONFIG_INVALID" });
      const msg = (err as Error).message;
      expect(msg).toContain("slots.b.device");
      expect(msg).toContain("heartbeatSecond is not a known field");
      expect(msg).toContain("timeouts.proveMs");
      expect(msg.indexOf(file)).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("without machine, takes the hostname or the DMI serial; with neither usable, refuses", () => {
    const text = BASE.replace("machine: node-4\n", "");
    const named = (hostname: string, serial: string | undefined, extra = "") =>
      parseAgentSection(text + extra, FILE, parseAgentConfig(text + extra, FILE), () => ({
        hostname,
        serial,
      }));
    expect(named("rack3-n7", "ABC123")).toMatchObject({
      machine: "rack3-n7",
      machineFrom: "hostname",
      nodeName: "rack3-n7",
    });
    expect(named("localhost", "ABC123\n")).toMatchObject({
      machine: "abc123",
      machineFrom: "dmi-serial",
    });
    expect(named("rack3-n7", "ABC123", "machineFrom: dmi-serial\n")).toMatchObject({
      machine: "abc123",
      machineFrom: "dmi-serial",
    });
    expect(named("localhost", "ABC123").machine).toBe("abc123");
    expect(() => named("localhost", "To Be Filled By O.E.M.")).toThrow(
      /no machine name: the hostname "localhost" is not one .* set machine: in agent.yaml/,
    );
    expect(() => named("", undefined)).toThrow(/product_serial\) cannot be read/);
    expect(named("x", undefined, "machine: given\n")).toMatchObject({ machineFrom: "config" });
    const t2 = BASE.replace("bootloader: { backend: grub, envDir: /boot/efi/EFI/liken }\n", "");
    expect(() => parseAgentSection(t2, FILE, parseAgentConfig(t2, FILE))).toThrow(
      /bootloader must be a mapping: write `bootloader: \{backend: grub, envDir/,
    );
  });

  /** The config with its bootloader section replaced by `section`. */
  function withBootloader(section: string) {
    const text = BASE.replace(
      "bootloader: { backend: grub, envDir: /boot/efi/EFI/liken }\n",
      section,
    );
    return parseAgentSection(text, FILE, parseAgentConfig(text, FILE));
  }

  it("builds the bootloader from backend and its fields; the first spelling still means grub", () => {
    expect(
      withBootloader(
        "bootloader: { backend: systemd-boot, esp: esp, efivars: /sys/firmware/efi/efivars }\n",
      ).bootloader,
    ).toEqual({
      backend: "systemd-boot",
      esp: "/etc/liken/esp",
      efivars: "/sys/firmware/efi/efivars",
    });
    expect(withBootloader("bootloader: { grubenvDir: /boot/efi/EFI/liken }\n").bootloader).toEqual({
      backend: "grub",
      envDir: "/boot/efi/EFI/liken",
    });
  });

  it.each([
    [
      "an unknown key",
      "bootloader: { backend: grub, envDir: /e, grubenvDir: /e }\n",
      /bootloader.grubenvDir is not a field of the grub backend/,
    ],
    [
      "a typo beside the first spelling",
      "bootloader: { grubenvDir: /e, timeout: 5 }\n",
      /bootloader.backend must be grub or systemd-boot/,
    ],
    [
      "an unknown backend",
      "bootloader: { backend: lilo }\n",
      /bootloader.backend must be grub or systemd-boot/,
    ],
    [
      "a grub field on systemd-boot",
      "bootloader: { backend: systemd-boot, esp: /e, efivars: /v, envDir: /e }\n",
      /bootloader.envDir is not a field of the systemd-boot backend/,
    ],
    [
      "systemd-boot without efivars",
      "bootloader: { backend: systemd-boot, esp: /e }\n",
      /bootloader.efivars must name a directory/,
    ],
  ])("refuses a bootloader section with %s", (_name, section, re) => {
    expect(() => withBootloader(section)).toThrow(re);
  });

  it("reads drain.driverPods, the names the drain's advice tells people to write", () => {
    const c = parse(`
drain:
  driverPods:
    gpu.example.com:
      namespace: gpu-system
      selector: { matchLabels: { app: gpu-kubelet-plugin } }
    net.example.com:
      selector:
        matchExpressions: [{ key: app, operator: In, values: [net-plugin] }]
`);
    expect(drainOptions(c).driverPods).toBe(c.driverPods);
    expect(c.driverPods).toEqual({
      "gpu.example.com": {
        namespace: "gpu-system",
        selector: { matchLabels: { app: "gpu-kubelet-plugin" } },
      },
      "net.example.com": {
        selector: { matchExpressions: [{ key: "app", operator: "In", values: ["net-plugin"] }] },
      },
    });
  });

  it.each([
    ["an unknown drain key", "drain: { driverPod: {} }\n", /drain.driverPod is not a known field/],
    [
      "a driver without a selector",
      "drain: { driverPods: { d: { namespace: x } } }\n",
      /drain.driverPods.d.selector must be a mapping/,
    ],
    [
      "an empty selector",
      "drain: { driverPods: { d: { selector: {} } } }\n",
      /drain.driverPods.d.selector must name matchLabels or matchExpressions/,
    ],
    [
      "a selector typo",
      "drain: { driverPods: { d: { selector: { matchLabel: { a: b } } } } }\n",
      /drain.driverPods.d.selector.matchLabel is not a known field/,
    ],
    [
      "a bad operator",
      "drain: { driverPods: { d: { selector: { matchExpressions: [{ key: a, operator: Has }] } } } }\n",
      /selector\.matchExpressions\[0\]\.operator must be one of In, NotIn, Exists, DoesNotExist \(got "Has"\)/,
    ],
  ])("refuses %s", (_name, extra, re) => {
    expect(() => parse(extra)).toThrow(re);
  });
});
