// The machine scenario (issue 13): a real control plane and cluster-operator on the host, a
// machine running liken-agent under systemd in a QEMU guest (or the lab's simulated machine,
// `--guest lab`), rolled to v2 (its trial proves and is promoted) and then to v3 (its trial
// panics, the bootloader falls back, the agent reports Failed and does not retry). On the way
// to v2 the host cuts the guest's way to the API server once the turn is granted: the agent
// must keep running, must not reboot, and must go on when the way is back.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { MachineBootloader, MachineRelease } from "../../images/machine/contract.js";
import { caPem, startHost, type Host } from "./machine-host.js";
import type { Guest, GuestBoot } from "./machine-guest.js";
import { machineKubeconfig } from "./machine-identity.js";
import { labReleases, startLabGuest } from "./machine-lab-guest.js";
import { MachineWatch } from "./machine-watch.js";
import { workloadPlacement } from "./machine-workload.js";
import { startRelay, type Relay } from "./relay.js";
import { formatBoot, type BootLine } from "./scenarios.js";
import type { Slot } from "../../src/bootloader/types.js";

export const MACHINE = "machine-1";
export const CLUSTER = "machine";
/** The versions of the lab stand-in's releases (the QEMU guest's come from its image build). */
const LAB_VERSIONS = ["2026.12.01-001", "2026.12.02-001", "2026.12.03-001"] as const;

/**
 * Deadlines, for 2 busy cores under TCG: a boot of the guest takes 1-2 min when quiet; the
 * first includes the agent's start and first report; a turn includes the download and write of
 * the slot, the drain, the read-back and the reboot into the trial.
 */
const FIRST_REPORT_MS = 360_000;
const TURN_GRANTED_MS = 600_000;
const TRIAL_PROVED_MS = 600_000;
const FALLBACK_MS = 600_000;
/** How long the way to the API server stays cut, and how long a Failed machine is watched. */
const CUT_MS = 30_000;
const NO_RETRY_MS = 20_000;
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
        machine: MACHINE,
      }),
      { mode: 0o600 },
    );
    return startLabGuest({
      dir: join(dir, "guest"),
      machine: MACHINE,
      cluster: CLUSTER,
      kubeconfig,
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
  /** The last line: `machine: backend=... promoted=... fell-back-from=... boots=N S s`. */
  summary: string;
}

const fmt = (ls: BootLine[]): string => ls.map((l, i) => formatBoot(i + 1, l)).join("; ");

export async function runMachineScenario(o: {
  bootloader: MachineBootloader;
  guest: GuestStarter;
  /** Cut the way to the API server during the v2 turn (default true). */
  cutApi?: boolean;
  out: (l: string) => void;
}): Promise<MachineRun> {
  const t0 = Date.now();
  const secs = (): string => ((Date.now() - t0) / 1000).toFixed(1);
  const say = (l: string): void => o.out(`[${secs().padStart(6)} s] ${l}`);
  const dir = mkdtempSync(join(tmpdir(), `liken-machine-${o.bootloader}-`));
  const run: MachineRun = {
    bootloader: o.bootloader,
    guest: o.guest.kind,
    boots: [],
    problems: [],
    seconds: 0,
    dir,
    summary: "",
  };
  let host: Host | undefined;
  let relay: Relay | undefined;
  let guest: Guest | undefined;
  let watch: MachineWatch | undefined;
  let printed = 0;
  const printBoots = (): void => {
    for (const b of guest?.boots.slice(printed) ?? []) {
      printed++;
      say(formatBoot(printed, b.line));
    }
  };
  const ticker = setInterval(printBoots, 250);
  try {
    const releases = await o.guest.releases(dir);
    const [v1, v2, v3] = releases.map((r) => r.version) as [string, string, string];
    say(`host: starting the control plane, the API, the channel (${releases.length} releases)`);
    host = await startHost({
      name: `machine-${process.pid}-${o.bootloader}`,
      dir: join(dir, "host"),
      machine: MACHINE,
      cluster: CLUSTER,
      releases,
      channelSource: (url) =>
        o.guest.kind === "lab" ? url : `http://10.0.2.101:8080`,
      lifetimeSeconds: LIFETIME_S,
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
    watch = new MachineWatch(host.api, MACHINE, CLUSTER, t0);
    guest = await o.guest.start({
      dir,
      host,
      relay,
      channelPort: Number(new URL(host.channel.url).port),
      t0,
      out: say,
      slotVersion: (slot) =>
        watch?.machine?.status?.slots?.find((x) => x.name === slot)?.version,
    });
    const w = watch;
    const g = guest;
    const api = host.api;

    await w.until(`${MACHINE} report ${v1}`, FIRST_REPORT_MS, (x) => {
      const s = x.machine?.status;
      return s?.version === v1 && s.step === "Ready";
    });
    say(`${MACHINE} reports ${v1}, Ready`);

    // v2: download, stage, turn, drain, trial, prove, promote.
    await api.clusters.patch(CLUSTER, { spec: { version: v2 } });
    say(`target ${v2}`);
    await w.until(`a turn granted to ${MACHINE} for ${v2}`, TURN_GRANTED_MS, (x) => x.turnHeld());
    say(`turn granted (step ${w.machine?.status?.step}/${w.machine?.status?.updateStage ?? "-"})`);
    if (o.cutApi !== false) {
      const bootsBefore = g.boots.length;
      relay.setCut(true);
      say(`fault: the way to the API server is cut for ${CUT_MS / 1000} s`);
      await sleep(CUT_MS);
      const refused = relay.refusedWhileCut;
      relay.setCut(false);
      const rebooted = g.boots.length !== bootsBefore;
      say(
        `fault: restored; while cut the agent tried ${refused} connections and the machine ${rebooted ? "REBOOTED" : "did not reboot"}`,
      );
      if (rebooted) run.problems.push("the machine rebooted while its API server was cut off");
      if (refused === 0)
        run.problems.push("no connection reached the relay while cut: was the agent still running?");
    }
    await w.until(`${MACHINE} proving and promoting ${v2}`, TRIAL_PROVED_MS, (x) => {
      const s = x.machine?.status;
      return s?.version === v2 && s.step === "Ready" && s.lastTrial?.result === "Succeeded";
    });
    say(`${MACHINE} promoted ${v2} (lastTrial ${w.machine?.status?.lastTrial?.reason})`);
    const placement = await workloadPlacement(host.kc);
    say(`workload after the drain: ${JSON.stringify(placement)}`);
    if ((placement[MACHINE] ?? 0) !== 0)
      run.problems.push(`pods still on ${MACHINE} after its drain: ${JSON.stringify(placement)}`);

    // v3: its trial panics; the bootloader falls back; Failed, and no retry.
    await api.clusters.patch(CLUSTER, { spec: { version: v3 } });
    say(`target ${v3}`);
    await w.until(`${MACHINE} reporting the fallback from ${v3}`, FALLBACK_MS, (x) => {
      const s = x.machine?.status;
      return s?.step === "Failed" && s.lastTrial?.version === v3;
    });
    const s = w.machine?.status;
    say(
      `${MACHINE} reads ${s?.version}, step ${s?.step}, lastTrial ${s?.lastTrial?.version} ${s?.lastTrial?.result} ${s?.lastTrial?.reason}`,
    );
    const boots = g.boots.length;
    await sleep(NO_RETRY_MS);
    printBoots();
    if (g.boots.length !== boots)
      run.problems.push(`the machine booted again after reporting Failed (it retried ${v3})`);

    // What the host's Machine must show at the end.
    const m = (await api.machines.get(MACHINE)).status;
    if (m?.version !== v2) run.problems.push(`the Machine reads LIKEN ${m?.version}, not ${v2}`);
    if (m?.step !== "Failed") run.problems.push(`the Machine's step is ${m?.step}, not Failed`);
    if (m?.lastTrial?.version !== v3 || m.lastTrial.reason !== "TrialFellBack")
      run.problems.push(`lastTrial is ${JSON.stringify(m?.lastTrial)}, not ${v3} TrialFellBack`);
    if (!(m?.failedReleases ?? []).some((f) => f.version === v3))
      run.problems.push(`failedReleases does not list ${v3}`);

    const expected: BootLine[] = [
      { slot: "a", version: v1, trial: false },
      { slot: "b", version: v2, trial: true },
      { slot: "a", version: v3, trial: true },
      { slot: "b", version: v2, trial: false },
    ];
    run.boots = [...g.boots];
    const seen = run.boots.map((b) => b.line);
    if (fmt(seen) !== fmt(expected))
      run.problems.push(`boots were [${fmt(seen)}], expected [${fmt(expected)}]`);

    // Timings: each boot to READY=1, the slot's download and write, the whole run.
    for (const [i, b] of run.boots.entries()) {
      if (b.readyMs !== undefined)
        say(`boot ${i + 1}: firmware to the agent's READY=1 in ${((b.readyMs - b.atMs) / 1000).toFixed(1)} s`);
    }
    for (const line of downloadTimes(w, [v2, v3])) say(line);
    for (const n of g.notes()) say(n);
    run.summary = `machine: backend=${o.bootloader} promoted=${v2} fell-back-from=${v3} boots=${run.boots.length} ${secs()} s`;
  } catch (e) {
    run.problems.push((e as Error).message);
  } finally {
    clearInterval(ticker);
    printBoots();
    if (guest) run.boots = [...guest.boots];
    await guest?.stop().catch((e: unknown) => run.problems.push(`stopping the guest: ${String(e)}`));
    await watch?.stop();
    await relay?.close();
    await host?.stop();
    run.seconds = (Date.now() - t0) / 1000;
  }
  return run;
}

/** "download and write of <v>: N s", from the first Downloading to the step after it. */
function downloadTimes(w: MachineWatch, versions: string[]): string[] {
  const out: string[] = [];
  let from = 0;
  for (const v of versions) {
    const i = w.steps.findIndex((c, k) => k >= from && c.step === "Downloading");
    if (i < 0) {
      out.push(`download and write of ${v}: not seen (shorter than the host's 0.5 s poll)`);
      continue;
    }
    const j = w.steps.findIndex((c, k) => k > i && c.step !== "Downloading");
    const end = j < 0 ? undefined : w.steps[j]!;
    out.push(
      end === undefined
        ? `download and write of ${v}: did not end`
        : `download and write of ${v}: ${((end.ms - w.steps[i]!.ms) / 1000).toFixed(1)} s (then ${end.step})`,
    );
    from = j < 0 ? w.steps.length : j;
  }
  return out;
}

/** Removes a passed run's files unless asked to keep them. */
export function cleanUp(run: MachineRun, keep: boolean): void {
  if (run.problems.length === 0 && !keep) rmSync(run.dir, { recursive: true, force: true });
}
