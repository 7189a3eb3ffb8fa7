// Kubernetes Events for each grant, release, stall and Lost machine: `kubectl describe
// cluster` and `kubectl get events` show who got a turn and why one was taken back.
// Events about cluster-scoped objects live in the "default" namespace (as the Node
// controller's do). Recording is best effort: a failed Event never blocks a decision, and
// Events travel on their own few connections (eventsConfig).
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { API_VERSION, reuseConnections, type Cluster } from "../api/index.js";

export const EVENT_NAMESPACE = "default";

/** The connections the operator's Events use at once, at most (eventsConfig). */
export const EVENT_CONNECTIONS = 4;

export type EventReason =
  | "TurnGranted"
  | "TurnReleased"
  | "TurnPaused"
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

/**
 * The Events' own copy of the kubeconfig, whose connections are at most EVENT_CONNECTIONS: a
 * pass that grants 500 turns makes 500 Events at once, and on the shared connections (no cap:
 * the watches hold theirs) each found none free and opened its own TLS connection, which cost
 * the operator most of its CPU outside decide and the API server a handshake each, at the
 * moment the wave's status writes needed it (docs/operator-profile.md). Events are best effort
 * and nothing waits for them: they queue on a few kept connections instead.
 */
export function eventsConfig(kc: KubeConfig): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kc.clusters,
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return reuseConnections(copy, { maxSockets: EVENT_CONNECTIONS });
}
