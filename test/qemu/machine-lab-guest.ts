// The machine scenario's stand-in guest before a real one boots (`--guest lab`): the lab's
// SimulatedMachine (the real `liken agent run`, file-backed slots, the GRUB firmware model),
// with "slot images" that are lab kernels (src/lab/releases.ts), whose header says the version
// and whether its boot panics. Everything on the host side runs as with QEMU: the identity,
// the relay to the API server, the operator, the drain. What it cannot show is the guest's
// own boot (no firmware, no systemd), so its boot lines come from the firmware model.
import { closeSync, openSync, readFileSync, readSync, writeFileSync } from "node:fs";
import { agentMessages } from "./machine-console.js";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { SimulatedMachine } from "../../src/lab/machine.js";
import { kernelBehaviour, labKernel } from "../../src/lab/releases.js";
import type { Slot } from "../../src/bootloader/types.js";
import type { MachineRelease } from "../../testbed/machine/contract.js";
import type { Guest, GuestBoot } from "./machine-guest.js";

const SLOT_IMAGE_BYTES = 1024 * 1024;

/** Three lab releases as the guest build would hand them over. */
export function labReleases(dir: string, versions: readonly string[]): MachineRelease[] {
  return versions.map((version, i) => {
    const panics = i === 2;
    const slotImage = path.join(dir, `slot-${version}.img`);
    writeFileSync(slotImage, labKernel(version, panics ? "panic" : "ok", SLOT_IMAGE_BYTES));
    return { version, slotImage, panics };
  });
}

function header(file: string): Buffer {
  const buf = Buffer.alloc(256);
  const fd = openSync(file, "r");
  try {
    readSync(fd, buf, 0, buf.length, 0);
  } finally {
    closeSync(fd);
  }
  return buf;
}

export async function startLabGuest(o: {
  dir: string;
  machine: string;
  cluster: string;
  /** The fleet's bootstrap credential: the machine joins for its own certificate. */
  bootstrapKubeconfig: string;
  /** The stand-in kubelet's identity (it writes the Node's status: the host's admin). */
  kubeletKubeconfig: string;
  /** Where the machine downloads its factory release from (the host's channel). */
  channelUrl: string;
  first: { version: string; digest: string };
  t0: number;
}): Promise<Guest> {
  const m = new SimulatedMachine({
    name: o.machine,
    dir: o.dir,
    cluster: o.cluster,
    bootstrapKubeconfig: o.bootstrapKubeconfig,
    kubeletKubeconfig: o.kubeletKubeconfig,
    slotSize: 4 * SLOT_IMAGE_BYTES,
    loopSeconds: 1,
    heartbeatSeconds: 5,
  });
  await m.create();
  m.faults = new Proxy({} as Partial<Record<Slot, "none" | "panic">>, {
    get: (_t, slot) =>
      slot === "a" || slot === "b"
        ? kernelBehaviour(header(m.slotFile(slot))) === "panic"
          ? "panic"
          : "none"
        : undefined,
  });
  await m.install(o.channelUrl, o.first.version, o.first.digest);
  m.powerOn();
  const boots: GuestBoot[] = [];
  // The firmware model's boot record, with each boot's version read from its slot as it boots.
  let stopped = false;
  const follow = (async () => {
    while (!stopped) {
      for (const b of m.boots.slice(boots.length)) {
        const text = header(m.slotFile(b.slot)).toString("latin1");
        const version = /\nversion: (\S+)\n/.exec(text)?.[1] ?? "(unknown)";
        boots.push({
          line: { slot: b.slot, version, trial: b.trial },
          atMs: b.at - o.t0,
          settled: true,
        });
      }
      await sleep(100);
    }
  })();
  return {
    kind: "lab",
    boots,
    notes: () => [`agent log: ${m.logFile}`],
    agentSaid: (fromMs, toMs) =>
      agentMessages(readFileSync(m.logFile, "utf8").split("\n"), (t) => {
        const ms = t - o.t0;
        return ms >= fromMs && ms <= toMs;
      }),
    async stop() {
      stopped = true;
      await follow;
      await m.stop();
    },
  };
}
