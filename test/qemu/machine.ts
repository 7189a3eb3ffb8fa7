// The machine scenario (issue 13): a real control plane and cluster-operator on the host, a
// machine running liken-agent under systemd in a QEMU guest (or the lab's simulated machine,
// `--guest lab`), rolled to v2 (its trial proves and is promoted) and then to v3 (its trial
// panics, the bootloader falls back, the agent reports Failed and does not retry). On the way
// to v2 the host cuts the guest's way to the API server once the turn is granted: the agent
// must keep running, must not reboot, and must go on when the way is back.
// On the real node (issue 25) the drain also removes a DRA claim holder before the DRA test
// driver that serves it (machine-dra.ts).
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MachineBootloader, MachineRelease } from "../../testbed/machine/contract.js";
import { dataDirOf } from "../../src/controlplane/instance.js";
import { caPem, startHost, type Host } from "./machine-host.js";
import type { Guest, GuestBoot } from "./machine-guest.js";
import { machineKubeconfig } from "./machine-identity.js";
import { labReleases, startLabGuest } from "./machine-lab-guest.js";
import { MachineWatch } from "./machine-watch.js";
import { NodeWatch } from "./node-watch.js";
import { startRelay, type Relay } from "./relay.js";
import { formatBoot } from "./scenarios.js";
import {
  finalChecks,
  rollAll,
  stopRecorders,
  timings,
  type Ctx,
  type Rolled,
} from "./machine-phases.js";
import type { Slot } from "../../src/bootloader/types.js";
import { machinePlan, type MachineScope } from "./machine-plan.js";

export const MACHINE = "machine-1";
export const CLUSTER = "machine";
/** The versions of the lab stand-in's releases (the QEMU guest's come from its image build). */
const LAB_VERSIONS = ["2026.12.01-001", "2026.12.02-001", "2026.12.03-001"] as const;

/** The operator's upper bound of life: longer than any run, shorter than a forgotten one. */
const LIFETIME_S = 3600;

export interface GuestStarter {
  kind: "qemu" | "lab";
  /** The releases' slot images (v1 installed, v2 good, v3 panics). */
  releases(dir: string): Promise<readonly MachineRelease[]>;
  start(o: {
    dir: string;
    host: Host;
    relay: Relay;
    channelPort: number;
    t0: number;
    out: (l: string) => void;
    /** What the host's Machine says a slot holds now (for a boot that dies before it speaks). */
    slotVersion: (slot: Slot) => string | undefined;
  }): Promise<Guest>;
}

/** The stand-in: the lab's simulated machine, reaching the API server through the relay. */
export const LAB_GUEST: GuestStarter = {
  kind: "lab",
  releases: async (dir) => labReleases(dir, LAB_VERSIONS),
  async start({ dir, host, relay, t0 }) {
    const kubeconfig = join(dir, "machine.kubeconfig");
    writeFileSync(
      kubeconfig,
      machineKubeconfig({
        server: `https://127.0.0.1:${relay.port}`,
        caPem: caPem(host),
        identity: host.identity,
      }),
      { mode: 0o600 },
    );
    return startLabGuest({
      dir: join(dir, "guest"),
      machine: MACHINE,
      cluster: CLUSTER,
      bootstrapKubeconfig: kubeconfig,
      kubeletKubeconfig: host.controlPlane.kubeconfig,
      channelUrl: host.channel.url,
      first: host.releases[0]!,
      t0,
    });
  },
};

export interface MachineRun {
  bootloader: MachineBootloader;
  guest: "qemu" | "lab";
  boots: GuestBoot[];
  problems: string[];
  seconds: number;
  dir: string;
  /** The last line (summaryLine). */
  summary: string;
  /** Text in the command line of every process the run started (leftovers.ts). */
  marks: string[];
}

/**
 * `machine: backend=... scope=whole|bootloader|turn|kubelet-down node=real|kwok promoted=...
 * fell-back-from=... <proofs> boots=N S s`.
 */
function summaryLine(
  bootloader: MachineBootloader,
  c: Ctx,
  [, v2, v3]: Rolled,
  boots: number,
  secs: string,
): string {
  const kind = c.node !== undefined ? "real" : "kwok";
  const proven = c.proven.map((p) => ` ${p}`).join("");
  return `machine: backend=${bootloader} scope=${c.plan.scope} node=${kind} promoted=${v2} fell-back-from=${v3}${proven} boots=${boots} ${secs} s`;
}

/**
 * v2 is adaptive (docs/releases.md): the guest fetches only what its running v1 lacks, so the
 * channel must have sent fewer bytes of it than its root filesystem holds.
 */
function checkAdaptive(c: Ctx, host: Host, v2: MachineRelease): void {
  const size = statSync(v2.slotImage).size;
  const fetched = host.served[v2.version] ?? { bytes: 0, requests: 0 };
  c.say(
    `v2: fetched ${fetched.bytes} bytes in ${fetched.requests} requests for a ${size}-byte root filesystem`,
  );
  // The lab's stand-in releases are 1 MiB apiece with nothing in common: nothing to reuse.
  if (!c.plan.adaptive || c.guest.kind === "lab") return;
  if (fetched.bytes >= size)
    c.problems.push(`v2 fetched ${fetched.bytes} bytes, not fewer than its size ${size}`);
  c.proven.push(`v2-fetched=${fetched.bytes}/${size}`);
}

export async function runMachineScenario(o: {
  bootloader: MachineBootloader;
  guest: GuestStarter;
  /** What this run proves (machine-plan.ts; default whole). */
  scope?: MachineScope;
  /** Cut the way to the API server during the v2 turn (default true; scopes whole and turn). */
  cutApi?: boolean;
  out: (l: string) => void;
}): Promise<MachineRun> {
  const t0 = Date.now();
  const secs = (): string => ((Date.now() - t0) / 1000).toFixed(1);
  const say = (l: string): void => o.out(`[${secs().padStart(6)} s] ${l}`);
  const dir = mkdtempSync(join(tmpdir(), `liken-machine-${o.bootloader}-`));
  const plan = machinePlan(o.scope ?? "whole", o.cutApi !== false);
  const run: MachineRun = {
    bootloader: o.bootloader,
    guest: o.guest.kind,
    boots: [],
    problems: [],
    seconds: 0,
    dir,
    summary: "",
    marks: [`${dir}/`],
  };
  let host: Host | undefined;
  let relay: Relay | undefined;
  let guest: Guest | undefined;
  let watch: MachineWatch | undefined;
  let node: NodeWatch | undefined;
  let ctx: Ctx | undefined;
  let printed = 0;
  const printBoots = (): void => {
    for (const b of guest?.boots.slice(printed) ?? []) {
      if (!b.settled) break;
      printed++;
      say(formatBoot(printed, b.line));
    }
  };
  const ticker = setInterval(printBoots, 250);
  try {
    // Without the kubelet-down trial its release is not published: the channel's newest is v3.
    const releases = (await o.guest.releases(dir)).filter(
      (r) => plan.kubeletDown || !r.kubeletDown,
    );
    const v1 = releases[0]!.version;
    say(`host: starting the control plane, the API, the channel (${releases.length} releases)`);
    const name = `machine-${process.pid}-${o.bootloader}`;
    run.marks.push(`${dataDirOf(name)}/`);
    host = await startHost({
      name,
      dir: join(dir, "host"),
      machine: MACHINE,
      cluster: CLUSTER,
      releases,
      channelSource: (url) => (o.guest.kind === "lab" ? url : `http://10.0.2.101:8080`),
      lifetimeSeconds: LIFETIME_S,
      realNode: o.guest.kind === "qemu",
      log: () => {},
    });
    const t = host.timings;
    say(
      `host: ready (${Object.entries(t)
        .map(([k, v]) => `${k} ${v.toFixed(1)} s`)
        .join(", ")})`,
    );
    const apiPort = Number(new URL(host.controlPlane.server).port);
    relay = await startRelay({ host: "127.0.0.1", port: apiPort });
    const channelPort = Number(new URL(host.channel.url).port);
    // The guest's forwards run `busybox nc 127.0.0.1 PORT` per connection (machine-qemu.ts).
    run.marks.push(`nc 127.0.0.1 ${relay.port}`, `nc 127.0.0.1 ${channelPort}`);
    watch = new MachineWatch(host.api, MACHINE, CLUSTER, t0);
    if (host.kubelet !== undefined) node = new NodeWatch(host.kc, MACHINE, t0);
    guest = await o.guest.start({
      dir,
      host,
      relay,
      channelPort,
      t0,
      out: say,
      slotVersion: (slot) => watch?.machine?.status?.slots?.find((x) => x.name === slot)?.version,
    });
    const c: Ctx = (ctx = {
      machine: MACHINE,
      cluster: CLUSTER,
      api: host.api,
      kc: host.kc,
      watch,
      guest,
      relay,
      say,
      problems: run.problems,
      t0,
      ...(node ? { node, caPem: caPem(host) } : {}),
      proven: [],
      plan,
    });
    const rolled = await rollAll(c, v1, releases.slice(1));
    checkAdaptive(c, host, releases[1]!);
    printBoots();
    run.boots = [...guest.boots];
    await finalChecks(c, rolled, run.boots);
    for (const l of timings(
      watch,
      run.boots,
      rolled.slice(1).filter((v): v is string => v !== undefined),
    ))
      say(l);
    for (const n of guest.notes()) say(n);
    run.summary = summaryLine(o.bootloader, c, rolled, run.boots.length, secs());
  } catch (e) {
    run.problems.push((e as Error).message);
  } finally {
    clearInterval(ticker);
    printBoots();
    if (guest) run.boots = [...guest.boots];
    await guest
      ?.stop()
      .catch((e: unknown) => run.problems.push(`stopping the guest: ${String(e)}`));
    await watch?.stop();
    await node?.stop();
    if (ctx) stopRecorders(ctx);
    await relay?.close();
    await host?.stop();
    run.seconds = (Date.now() - t0) / 1000;
  }
  return run;
}

/**
 * Removes a passed run's files unless asked to keep them; of a failed run, keeps the logs and
 * removes the disk copy and the channel (a gigabyte, and rebuilt by the next run anyway).
 */
export function cleanUp(run: MachineRun, keep: boolean): void {
  if (keep) return;
  if (run.problems.length === 0) {
    rmSync(run.dir, { recursive: true, force: true });
    return;
  }
  for (const big of ["disk.img", join("host", "channel")])
    rmSync(join(run.dir, big), { recursive: true, force: true });
}
