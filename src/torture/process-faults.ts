// The torture's faults on processes this run started, by pid: an agent paused (SIGSTOP of its
// group), a machine's power cut (at any instant, or as a machine begins a phase), an operator
// copy or a control-plane process killed and started again as its supervisor would. Each keeps
// one of its kind per process at a time, and remembers what it started, for the run's end.
import { readFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { LAB_RUN_DIR } from "../lab/paths.js";
import type { CutWhen, TortureFault } from "./schedule.js";
import { imageOf, respawn, signal } from "./respawn.js";
import type { Stall } from "./recall-rules.js";
import type { FaultTargets } from "./fault-targets.js";
import { saidSince, sizeOf } from "./agent-log.js";

/** How often a power cut waiting for its step looks again: well under a download's length. */
const STEP_POLL_MS = 100;
/** How often it reads the agent's log again: a read-back of the lab's slots takes ~100 ms. */
const LOG_POLL_MS = 10;

export class ProcessFaults {
  /** Processes this run started again (operator copies, kube-apiserver): stopped at its end. */
  readonly respawned = new Set<number>();
  /** Control-plane processes being killed and started again (kube-apiserver, etcd). */
  private readonly cpDown = new Set<string>();
  /** Operator copies being killed and started again. */
  private readonly restarting = new Set<string>();
  /** Machines whose power cut is under way (a phase seen once is one machine's, once). */
  private readonly cutting = new Set<string>();
  /** Agents' pauses (SIGSTOP windows): an agent paused cannot see a recall. */
  readonly stalls: Stall[] = [];

  constructor(private readonly t: FaultTargets) {}

  private bootIdOf(machine: string): string {
    const m = this.t.fleet.machines.get(machine);
    try {
      return m ? readFileSync(m.bootIdFile, "utf8").trim() : "unknown";
    } catch {
      return "unknown";
    }
  }

  /** SIGSTOP of the agent's group (the agent and its download child), SIGCONT after `ms`. */
  async pauseAgent(machine: string, ms: number): Promise<string> {
    const pid = this.t.fleet.machines.get(machine)!.agentPid;
    if (pid === undefined) return "skipped: no agent running";
    const from = Date.now();
    signal(pid, "SIGSTOP", true);
    await sleep(ms);
    signal(pid, "SIGCONT", true);
    this.stalls.push({ machine, from, to: Date.now() });
    return "done";
  }

  async powerCut(f: Extract<TortureFault, { kind: "power-cut" }>, endAt: number): Promise<string> {
    const { fleet } = this.t;
    // A cut drawn for a phase falls on the first machine to begin it: a phase lasts well
    // under a second and each machine passes it once, so waiting for one machine's would
    // mostly wait in vain.
    const victim = f.when === "any" ? f.machine : await this.firstTo(f.when, endAt);
    if (victim === undefined) return `skipped: no machine began "${f.when}" in the fault window`;
    // One cut of a machine at a time: two at once would power it on twice (two boots,
    // two agents), which no machine does. (firstTo claims its machine itself.)
    if (f.when === "any") {
      if (this.cutting.has(victim)) return `skipped: a power cut of ${victim} is under way`;
      this.cutting.add(victim);
    }
    this.t.record({
      kind: "reboot",
      at: Date.now(),
      machine: victim,
      bootId: this.bootIdOf(victim),
      cause: "power",
    });
    try {
      await fleet.machines.get(victim)!.powerCycle();
    } finally {
      this.cutting.delete(victim);
    }
    return `done (${victim})`;
  }

  /** SIGKILL of a control-plane process, started again after `ms` with what /proc showed. */
  async restartControlPlane(name: string, ms: number): Promise<string> {
    if (this.cpDown.has(name)) return `skipped: ${name} is already restarting`;
    const rec = this.t.lab.controlPlane.processes.find((p) => p.name === name)!;
    this.cpDown.add(name);
    try {
      const image = imageOf(rec.pid);
      signal(rec.pid, "SIGKILL");
      await sleep(ms);
      const fresh = respawn(image, rec.log);
      this.respawned.add(fresh);
      rec.pid = fresh;
      return `done (pid ${fresh})`;
    } finally {
      this.cpDown.delete(name);
    }
  }

  /** SIGKILL of an operator copy, and its start again after `f.ms` (as its Deployment would). */
  async restartCopy(f: Extract<TortureFault, { kind: "operator-kill" }>): Promise<string> {
    const { fleet } = this.t;
    // One restart of a copy at a time: a second kill meanwhile would find the pid gone.
    if (this.restarting.has(f.copy)) return `skipped: ${f.copy} is already restarting`;
    this.restarting.add(f.copy);
    try {
      const pid = fleet.operators.get(f.copy)!;
      const image = imageOf(pid);
      signal(pid, "SIGCONT"); // a paused copy dies as surely
      signal(pid, "SIGKILL");
      await sleep(f.ms);
      const fresh = respawn(image, path.join(LAB_RUN_DIR, `operator-${f.copy}.log`));
      this.respawned.add(fresh);
      fleet.operators.set(f.copy, fresh);
      this.t.record({ kind: "operator-start", at: Date.now(), copy: f.copy });
      return `done (pid ${pid} -> ${fresh})`;
    } finally {
      this.restarting.delete(f.copy);
    }
  }

  /**
   * The first machine to reach the instant a power cut is drawn for: a Machine step the
   * watcher sees (Downloading), or a phase its agent's log begins (a phase lasts milliseconds
   * to a second: the log, read on from where it ended, is the only place it shows in time).
   */
  private async firstTo(when: Exclude<CutWhen, "any">, endAt: number): Promise<string | undefined> {
    const marker = JSON.stringify({ step: when }).slice(1, -1);
    const from = new Map([...this.t.fleet.machines].map(([n, m]) => [n, sizeOf(m.logFile)]));
    for (;;) {
      for (const [name, m] of this.t.fleet.machines) {
        if (when === "Downloading") {
          if (this.t.stepOf(name) === when && !this.cutting.has(name)) {
            this.cutting.add(name);
            return name;
          }
          continue;
        }
        const look = saidSince(m.logFile, from.get(name)!, marker);
        from.set(name, look.next);
        // Claimed here, in the same turn of the event loop: another cut waiting for the same
        // phase must not fall on the same line of the same log.
        if (look.said && !this.cutting.has(name)) {
          this.cutting.add(name);
          return name;
        }
      }
      if (Date.now() > endAt) return undefined;
      await sleep(when === "Downloading" ? STEP_POLL_MS : LOG_POLL_MS);
    }
  }

  /** Ends what this run started again (the lab's stoppers know only the first copies). */
  stop(): void {
    for (const pid of this.respawned) signal(pid, "SIGKILL");
  }
}
