// The machine guest under QEMU: a copy of the disk the image build made (its state partition
// given the fleet's bootstrap credential alone), OVMF with a copy of its variables, the i6300esb watchdog,
// and user networking that reaches nothing but the host's API server (through the relay the
// scenario can cut) and its release channel: restrict=on, and one guestfwd per address, each
// connection handed to `busybox nc` to the loopback port (a `cmd:` forward runs once per
// connection; a chardev forward would carry one connection for the guest's whole life).
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  GUEST_ADDRESS,
  GUEST_API,
  GUEST_CHANNEL,
  type MachineBootloader,
  type MachineImages,
} from "../../testbed/machine/contract.js";
import { buildMachineImages } from "../../testbed/machine/build.js";
import { writeStatePartition } from "../../testbed/machine/state.js";
import { OVMF_VARS } from "../../testbed/qemu.js";
import type { Slot } from "../../src/bootloader/types.js";
import { caPem } from "./machine-host.js";
import { machineKubeconfig } from "./machine-identity.js";
import {
  agentMessages,
  parseBoots,
  type ConsoleBoot,
  type ConsoleLine,
} from "./machine-console.js";
import type { Guest } from "./machine-guest.js";
import { CLUSTER, MACHINE, type GuestStarter } from "./machine.js";
import { PoweredQemu } from "./powered.js";
import { kubeletKubeconfig } from "./kubelet-identity.js";
import { NODE_LABELS } from "./machine-workload.js";

/** The guest's memory: Debian with systemd and Node.js, the agent downloading, containerd and the kubelet. */
const MEMORY_MIB = 1024;
/** QEMU's upper bound of life: longer than any scenario, ends a forgotten one. */
const QEMU_LIFETIME_S = 3600;
const CONSOLE_POLL_MS = 200;

function netdev(relayPort: number, channelPort: number): string {
  const fwd = (to: { host: string; port: number }, port: number): string =>
    `guestfwd=tcp:${to.host}:${to.port}-cmd:busybox nc 127.0.0.1 ${port}`;
  return [
    "user,id=n0,restrict=on",
    fwd(GUEST_API, relayPort),
    fwd(GUEST_CHANNEL, channelPort),
  ].join(",");
}

export function qemuGuest(bl: MachineBootloader, log: (l: string) => void): GuestStarter {
  let images: MachineImages | undefined;
  return {
    kind: "qemu",
    async releases() {
      const t0 = Date.now();
      images = await buildMachineImages(bl, log);
      log(`machine image (${bl}) ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      return images.releases;
    },
    async start({ dir, host, relay, channelPort, t0, slotVersion }) {
      if (images === undefined) throw new Error("releases() first");
      const disk = join(dir, "disk.img");
      copyFileSync(images.disk, disk);
      const kubeconfig = machineKubeconfig({
        server: `https://${GUEST_API.host}:${GUEST_API.port}`,
        caPem: caPem(host),
        identity: host.identity,
      });
      writeFileSync(join(dir, "machine.kubeconfig"), kubeconfig, { mode: 0o600 });
      // The factory install: v1 in slot a, its release document and marker on the state
      // partition, so the agent knows from its first boot what runs; and the node's own files:
      // the kubelet's identity, the Node's name and labels.
      const v1 = host.releases[0]!;
      if (host.kubelet === undefined) throw new Error("the host issued no kubelet identity");
      writeStatePartition(
        disk,
        images,
        { machine: MACHINE, cluster: CLUSTER, kubeconfig, bootstrap: true },
        {
          ...v1,
          document: readFileSync(join(host.channelDir, v1.version, "release.yaml")),
        },
        {
          nodeName: MACHINE,
          labels: NODE_LABELS,
          kubeconfig: kubeletKubeconfig({
            server: `https://${GUEST_API.host}:${GUEST_API.port}`,
            caPem: caPem(host),
            identity: host.kubelet,
            node: MACHINE,
          }),
          clientCaPem: caPem(host),
          nodeIp: GUEST_ADDRESS,
        },
      );
      const vars = join(dir, "OVMF_VARS.fd");
      copyFileSync(images.ovmfVars ?? OVMF_VARS, vars);
      const qemu = await PoweredQemu.start({
        dir,
        disk,
        vars,
        serialSocket: join(dir, "serial.sock"),
        serialLog: join(dir, "serial.log"),
        memoryMiB: MEMORY_MIB,
        lifetimeSeconds: QEMU_LIFETIME_S,
        extra: ["-netdev", netdev(relay.port, channelPort), "-device", "virtio-net-pci,netdev=n0"],
      });
      const serial = qemu.serial;
      // The console's lines with their arrival times (to the poll's 0.2 s).
      const lines: ConsoleLine[] = [];
      let used = 0;
      let stopped = false;
      const follow = (async () => {
        while (!stopped) {
          const nl = serial.text.lastIndexOf("\n");
          if (nl >= used) {
            const ms = Date.now() - t0;
            for (const text of serial.text.slice(used, nl).split("\n")) {
              lines.push({ ms, text });
            }
            used = nl + 1;
          }
          await sleep(CONSOLE_POLL_MS);
        }
      })();
      // A boot that dies before its initrd speaks: the version the host's Machine says that
      // slot holds (fixed the first time the boot is read).
      const known = new Map<number, string>();
      const versionOf = (slot: Slot, i: number): string | undefined => {
        if (!known.has(i)) {
          const v = slotVersion(slot);
          if (v !== undefined) known.set(i, v);
        }
        return known.get(i);
      };
      let parsed: ConsoleBoot[] = [];
      const boots = (): ConsoleBoot[] => (parsed = parseBoots(lines, versionOf));
      return {
        kind: "qemu",
        get boots() {
          return boots().map((b) => ({
            line: b.line,
            atMs: b.atMs,
            settled: b.settled,
            ...(b.readyMs !== undefined ? { readyMs: b.readyMs } : {}),
            ...(b.initrd !== undefined ? { initrd: b.initrd } : {}),
          }));
        },
        // By when the line reached the console: the guest's clock is not the host's.
        agentSaid: (fromMs, toMs) =>
          agentMessages(
            lines.filter((l) => l.ms >= fromMs && l.ms <= toMs).map((l) => l.text),
            () => true,
          ),
        console: () => lines.map((l) => l.text),
        notes: () => [
          ...parsed.flatMap((b, i) =>
            b.agentLines.slice(0, 6).map((l) => `boot ${i + 1} console: ${l}`),
          ),
          `serial log: ${join(dir, "serial.log")} (the guest was powered on ${qemu.powerCycles + 1} times)`,
        ],
        async stop() {
          stopped = true;
          await follow;
          // Every console line with when it arrived: where each boot spends its time.
          writeFileSync(
            join(dir, "console-timeline.txt"),
            lines.map((l) => `${(l.ms / 1000).toFixed(1).padStart(7)} s  ${l.text}`).join("\n"),
          );
          await qemu.stop();
        },
      } satisfies Guest;
    },
  };
}
