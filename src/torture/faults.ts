// Injects one run's fault schedule into the lab's real processes: only processes this run
// started (the fleet's agents and operator copies, the lab's kube-apiserver), by pid.
import { readFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { MachineStep } from "../api/types.js";
import type { Observation } from "../invariants/index.js";
import type { Lab } from "../lab/lab.js";
import type { Fleet } from "../lab/processes.js";
import { LAB_RUN_DIR } from "../lab/paths.js";
import { describeFault, type TortureFault } from "./schedule.js";
import { imageOf, respawn, signal } from "./respawn.js";

export interface FaultTargets {
  lab: Lab;
  fleet: Fleet;
  /** A machine's step as the watcher last saw it. */
  stepOf: (machine: string) => MachineStep | undefined;
  /** What the runner itself did that the checker must know (power cuts, operator starts). */
  record: (o: Observation) => void;
  log: (line: string) => void;
}

/** How often a power cut waiting for its step looks again: well under a step's length. */
const STEP_POLL_MS = 100;

export class FaultInjector {
  /** Processes this run started again (operator copies, kube-apiserver): stopped at its end. */
  readonly respawned = new Set<number>();
  private apiserverDown = false;
  readonly applied: string[] = [];

  constructor(private readonly t: FaultTargets) {}

  /** Applies every fault at its time after `t0`, each in its own task; resolves when all are done. */
  async run(faults: readonly TortureFault[], t0: number, endAt: number): Promise<void> {
    await Promise.all(
      faults.map(async (f) => {
        await sleep(Math.max(0, t0 + f.at - Date.now()));
        const said = await this.apply(f, endAt).catch(
          (e: unknown) => `failed: ${(e as Error).message}`,
        );
        const line = `${describeFault(f)}: ${said}`;
        this.applied.push(line);
        this.t.log(`  fault ${line}`);
      }),
    );
  }

  private bootIdOf(machine: string): string {
    const m = this.t.fleet.machines.get(machine);
    try {
      return m ? readFileSync(m.bootIdFile, "utf8").trim() : "unknown";
    } catch {
      return "unknown";
    }
  }

  private async apply(f: TortureFault, endAt: number): Promise<string> {
    const { fleet, lab } = this.t;
    switch (f.kind) {
      case "agent-kill": {
        const m = fleet.machines.get(f.machine)!;
        if (m.agentPid === undefined) return "skipped: no agent running";
        m.crashAgent();
        return "done";
      }
      case "agent-pause": {
        const pid = fleet.machines.get(f.machine)!.agentPid;
        if (pid === undefined) return "skipped: no agent running";
        // The agent's group: the agent and its download child stop together.
        signal(pid, "SIGSTOP", true);
        await sleep(f.ms);
        signal(pid, "SIGCONT", true);
        return "done";
      }
      case "operator-pause": {
        const pid = fleet.operators.get(f.copy)!;
        signal(pid, "SIGSTOP");
        await sleep(f.ms);
        signal(pid, "SIGCONT");
        this.t.record({ kind: "operator-start", at: Date.now(), copy: f.copy });
        return "done";
      }
      case "operator-kill": {
        const pid = fleet.operators.get(f.copy)!;
        const image = imageOf(pid);
        signal(pid, "SIGCONT"); // a paused copy dies as surely, but say so to no one
        signal(pid, "SIGKILL");
        await sleep(f.ms);
        const fresh = respawn(image, path.join(LAB_RUN_DIR, `operator-${f.copy}.log`));
        this.respawned.add(fresh);
        fleet.operators.set(f.copy, fresh);
        this.t.record({ kind: "operator-start", at: Date.now(), copy: f.copy });
        return `done (pid ${pid} -> ${fresh})`;
      }
      case "apiserver-restart": {
        if (this.apiserverDown) return "skipped: kube-apiserver is already restarting";
        const rec = lab.controlPlane.processes.find((p) => p.name === "kube-apiserver")!;
        this.apiserverDown = true;
        try {
          const image = imageOf(rec.pid);
          signal(rec.pid, "SIGKILL");
          await sleep(f.ms);
          const fresh = respawn(image, rec.log);
          this.respawned.add(fresh);
          rec.pid = fresh;
          return `done (pid ${fresh})`;
        } finally {
          this.apiserverDown = false;
        }
      }
      case "power-cut": {
        const m = fleet.machines.get(f.machine)!;
        if (f.when !== "any") {
          while (this.t.stepOf(f.machine) !== f.when) {
            if (Date.now() > endAt)
              return `skipped: ${f.machine} was never ${f.when} in the fault window`;
            await sleep(STEP_POLL_MS);
          }
        }
        this.t.record({
          kind: "reboot",
          at: Date.now(),
          machine: f.machine,
          bootId: this.bootIdOf(f.machine),
          cause: "power",
        });
        await m.powerCycle();
        return "done";
      }
      default: {
        const never: never = f;
        throw new Error(`unknown fault ${JSON.stringify(never)}`);
      }
    }
  }

  /** Ends what this run started again (the lab's stoppers know only the first copies). */
  stop(): void {
    for (const pid of this.respawned) signal(pid, "SIGKILL");
  }
}
