// Kubernetes Events for each grant, release, stall and Lost machine: `kubectl describe
// cluster` and `kubectl get events` show who got a turn and why one was taken back.
// Events about cluster-scoped objects live in the "default" namespace (as the Node
// controller's do). Recording is best effort: a failed Event never blocks a decision.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { API_VERSION, type Cluster } from "../api/index.js";

export const EVENT_NAMESPACE = "default";

export type EventReason =
  | "TurnGranted"
  | "TurnReleased"
  | "RolloutStalled"
  | "MachineLost"
  | "MachineBack"
  | "HeartbeatUnseen"
  | "ReleaseFailed"
  | "OutsideMaintenanceWindow"
  | "CanaryPaused"
  | "AwaitingFirstTrial"
  | "StatusWriteRefused"
  | "RolloutPaused"
  | "ReleaseRevoked"
  | "Reverted"
  | "RevertRetargeted"
  | "ChannelTrusted"
  | "ChannelDistrusted";

export interface EventSink {
  record(cluster: Cluster, type: "Normal" | "Warning", reason: EventReason, message: string): void;
}

export class KubeEvents implements EventSink {
  private readonly api: CoreV1Api;
  /** Requests made (for the benchmark's requests-per-turn). */
  sent = 0;

  constructor(
    kc: KubeConfig,
    private readonly component: string,
    private readonly identity: string,
    private readonly onError: (e: unknown) => void,
  ) {
    this.api = kc.makeApiClient(CoreV1Api);
  }

  record(cluster: Cluster, type: "Normal" | "Warning", reason: EventReason, message: string): void {
    const now = new Date();
    this.sent++;
    this.api
      .createNamespacedEvent({
        namespace: EVENT_NAMESPACE,
        body: {
          metadata: { generateName: `${cluster.metadata.name}.` },
          involvedObject: {
            apiVersion: API_VERSION,
            kind: "Cluster",
            name: cluster.metadata.name,
            ...(cluster.metadata.uid === undefined ? {} : { uid: cluster.metadata.uid }),
          },
          type,
          reason,
          message: message.slice(0, 1024),
          source: { component: this.component },
          reportingComponent: this.component,
          reportingInstance: this.identity.slice(0, 128),
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      })
      .catch(this.onError);
  }
}
