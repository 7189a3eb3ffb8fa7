// Injects one run's fault schedule into the lab's real processes: only processes this run
// started (the fleet's agents and operator copies, the lab's kube-apiserver), by pid.
// Each fault is applied at its time in a task of its own; the families of faults live beside
// this file (process-faults.ts, release-faults.ts, identity-faults.ts), and the injector keeps
// what the run's judgement reads of them: the lines applied and the rules a fault's own outcome
// broke, the recalls signed, the agents' pauses, when a bad release became the target.
import { setTimeout as sleep } from "node:timers/promises";
import type { TortureViolation } from "./violation.js";
import { describeFault, type TortureFault } from "./schedule.js";
import { signal } from "./respawn.js";
import type { RecallMark, Stall } from "./recall-rules.js";
import type { FaultTargets } from "./fault-targets.js";
import { ProcessFaults } from "./process-faults.js";
import { ReleaseFaults } from "./release-faults.js";
import { IdentityFaults } from "./identity-faults.js";

export type { FaultTargets } from "./fault-targets.js";
export type { TortureViolation } from "./violation.js";

export class FaultInjector {
  readonly applied: string[] = [];
  /** Rules a fault's own outcome broke (a bad release the fleet never stopped). */
  readonly broken: TortureViolation[] = [];
  private readonly processes: ProcessFaults;
  private readonly releases: ReleaseFaults;
  private readonly identity: IdentityFaults;

  constructor(private readonly t: FaultTargets) {
    this.processes = new ProcessFaults(t);
    this.releases = new ReleaseFaults(t, this.broken);
    this.identity = new IdentityFaults(t, this.broken);
  }

  /** Processes this run started again (operator copies, kube-apiserver): stopped at its end. */
  get respawned(): Set<number> {
    return this.processes.respawned;
  }
  /** The recalls this run signed, for the recall rules (recall-rules.ts). */
  get recallMarks(): RecallMark[] {
    return this.releases.recallMarks;
  }
  /** Agents' pauses (SIGSTOP windows): an agent paused cannot see a recall. */
  get stalls(): Stall[] {
    return this.processes.stalls;
  }
  /** When the bad release became the target (the floor rule counts from here). */
  get badSetAt(): number | undefined {
    return this.releases.badSetAt;
  }

  /** Applies every fault at its time after `t0`, each in its own task; resolves when all are done. */
  async run(faults: readonly TortureFault[], t0: number, endAt: number): Promise<void> {
    await Promise.all(
      faults.map(async (f) => {
        await sleep(Math.max(0, t0 + f.at - Date.now()));
        this.t.log(`  fault ${describeFault(f)}: applying`);
        const said = await this.apply(f, endAt).catch(
          (e: unknown) => `failed: ${(e as Error).message}`,
        );
        const line = `${describeFault(f)}: ${said}`;
        this.applied.push(line);
        this.t.log(`  fault ${line}`);
      }),
    );
  }

  private async apply(f: TortureFault, endAt: number): Promise<string> {
    const { fleet } = this.t;
    switch (f.kind) {
      case "agent-kill": {
        const m = fleet.machines.get(f.machine)!;
        if (m.agentPid === undefined) return "skipped: no agent running";
        m.crashAgent();
        return "done";
      }
      case "agent-pause":
        return this.processes.pauseAgent(f.machine, f.ms);
      case "operator-pause": {
        const pid = fleet.operators.get(f.copy)!;
        signal(pid, "SIGSTOP");
        await sleep(f.ms);
        signal(pid, "SIGCONT");
        this.t.record({ kind: "operator-start", at: Date.now(), copy: f.copy });
        return "done";
      }
      case "operator-kill":
        return this.processes.restartCopy(f);
      case "apiserver-restart":
        return this.processes.restartControlPlane("kube-apiserver", f.ms);
      case "etcd-restart":
        return this.processes.restartControlPlane("etcd", f.ms);
      case "retarget":
        return this.releases.retarget();
      case "bad-release":
        return this.releases.badRelease(f.ms);
      case "relay-cut": {
        const relay = this.t.relays.get(f.machine)!;
        relay.sever();
        await sleep(f.ms);
        relay.heal();
        return "done";
      }
      case "power-cut":
        return this.processes.powerCut(f, endAt);
      case "ca-rotated":
        return this.identity.caRotated(f.machine);
      case "cert-lapse":
        return this.identity.certLapse(f.machine);
      case "recall":
        return this.releases.recall(f.ms);
      default: {
        const never: never = f;
        throw new Error(`unknown fault ${JSON.stringify(never)}`);
      }
    }
  }

  /** Ends what this run started again (the lab's stoppers know only the first copies). */
  stop(): void {
    this.processes.stop();
  }
}
