// What the host sees of the guest's Node, twice a second: each change of its bootID or of its
// Ready condition (status and heartbeat), with the host time it was seen. The scenario's proof
// that a trial was promoted only after the Node showed the trial boot's id and a Ready from
// that boot comes from here (machine-phases.ts).
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, type KubeConfig, type V1Node } from "@kubernetes/client-node";

const POLL_MS = 500;

export interface NodeSight {
  /** Host ms since the scenario's start. */
  ms: number;
  bootId: string;
  ready: string;
  /** The Ready condition's lastHeartbeatTime (the kubelet's clock), ms since the epoch. */
  heartbeatAt?: number;
}

function sightOf(n: V1Node, ms: number): NodeSight {
  const r = n.status?.conditions?.find((c) => c.type === "Ready");
  const hb = r?.lastHeartbeatTime;
  return {
    ms,
    bootId: n.status?.nodeInfo?.bootID ?? "",
    ready: r?.status ?? "(none)",
    ...(hb ? { heartbeatAt: new Date(hb).getTime() } : {}),
  };
}

export class NodeWatch {
  readonly sights: NodeSight[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly kc: KubeConfig,
    private readonly node: string,
    private readonly t0: number,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    const core = this.kc.makeApiClient(CoreV1Api);
    while (!this.stopped) {
      try {
        const sight = sightOf(await core.readNode({ name: this.node }), Date.now() - this.t0);
        const last = this.sights.at(-1);
        if (
          last?.bootId !== sight.bootId ||
          last.ready !== sight.ready ||
          last.heartbeatAt !== sight.heartbeatAt
        ) {
          this.sights.push(sight);
        }
      } catch {
        // No Node yet (the kubelet has not registered), or the API server is busy: next poll.
      }
      await sleep(POLL_MS);
    }
  }

  /** The Node as last seen. */
  get last(): NodeSight | undefined {
    return this.sights.at(-1);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}
