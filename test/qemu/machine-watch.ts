// What the host sees of the machine through the API: its Machine and the Cluster's turn
// record, read twice a second, every change of step kept with the time it was seen (the
// scenario's download and turn timings come from here). Waits are on conditions, with deadlines.
import { setTimeout as sleep } from "node:timers/promises";
import type { LikenApi } from "../../src/api/client.js";
import type { Cluster, Machine } from "../../src/api/types.js";

const POLL_MS = 500;

export interface StepChange {
  ms: number;
  step: string;
  stage?: string;
  version?: string;
}

export class MachineWatch {
  machine: Machine | undefined;
  cluster: Cluster | undefined;
  readonly steps: StepChange[] = [];
  private readonly t0: number;
  private stopped = false;
  private readonly loop: Promise<void>;
  private lastError: unknown;

  constructor(
    private readonly api: LikenApi,
    private readonly machineName: string,
    private readonly clusterName: string,
    t0 = Date.now(),
  ) {
    this.t0 = t0;
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        this.machine = await this.api.machines.get(this.machineName);
        this.cluster = await this.api.clusters.get(this.clusterName);
        const s = this.machine.status;
        const last = this.steps.at(-1);
        const step = s?.step ?? "(none)";
        if (last?.step !== step || last.stage !== s?.updateStage || last.version !== s?.version) {
          this.steps.push({
            ms: Date.now() - this.t0,
            step,
            ...(s?.updateStage ? { stage: s.updateStage } : {}),
            ...(s?.version ? { version: s.version } : {}),
          });
        }
      } catch (e) {
        this.lastError = e;
      }
      await sleep(POLL_MS);
    }
  }

  /** Whether the Cluster records a turn for this machine now. */
  turnHeld(): boolean {
    return (this.cluster?.status?.rebootTurns ?? []).some((t) => t.machine === this.machineName);
  }

  async until(what: string, timeoutMs: number, ok: (w: MachineWatch) => boolean): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!ok(this)) {
      if (Date.now() > deadline) {
        const s = this.machine?.status;
        throw new Error(
          `the host did not see ${what} within ${timeoutMs / 1000} s; Machine ${this.machineName} reads step=${s?.step} version=${s?.version} lastTrial=${JSON.stringify(s?.lastTrial)}${this.lastError ? `; last API error: ${(this.lastError as Error).message}` : ""}`,
        );
      }
      await sleep(POLL_MS / 2);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}
