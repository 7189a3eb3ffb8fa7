// What the agent asks of the API server, over the lean REST client (api/rest.ts): its Machine,
// its Cluster, its Node, its heartbeat Lease. No @kubernetes/client-node here: the idle agent
// must stay small (docs/adr/agent-lean-api-client.md); the drain, which needs client-node,
// loads it when a turn is held (kubeConfigWhenNeeded, below; only its type is imported here).
import type { KubeConfig } from "@kubernetes/client-node";
import { LeaseRenewal } from "../api/lease-renewal.js";
import { Rest, loadRestConfig } from "../api/rest.js";
import { RestResource } from "../api/rest-resource.js";
import {
  API_VERSION,
  CLUSTER_KIND,
  CLUSTER_PLURAL,
  HEARTBEAT_NAMESPACE,
  heartbeatLeaseMetadata,
  heartbeatLeaseName,
  LOST_AFTER_SECONDS,
  MACHINE_KIND,
  MACHINE_PLURAL,
  type Cluster,
  type Machine,
} from "../api/types.js";

/** The part of a Node the agent reads. */
export interface NodeView {
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> };
  status?: {
    conditions?: { type: string; status: string; lastHeartbeatTime?: string }[];
    /** bootID: the boot the kubelet that posted this status runs in (rejoin.ts). */
    nodeInfo?: { bootID?: string };
  };
}

interface Lease {
  apiVersion: string;
  kind: string;
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string> };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string };
}

/**
 * kubectl's naming: the object's name and a unique suffix, within the 253 characters of a name
 * (a Machine's own name may take all 253): the name is cut, never the suffix.
 */
export function eventName(machine: string, nowMs: number): string {
  const suffix = `.${nowMs.toString(16)}`;
  const head = machine.slice(0, 253 - suffix.length).replace(/[.-]+$/, "");
  return `${head}${suffix}`;
}

/** The fields of a core/v1 Event the agent writes. */
interface KubeEvent {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  involvedObject: { apiVersion: string; kind: string; name: string; uid?: string };
  type: string;
  reason: string;
  message: string;
  source: { component: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
}

/** A MicroTime: the server parses exactly six fractional digits. */
export function microTime(now: Date): string {
  return now.toISOString().replace(/Z$/, "000Z");
}

export class AgentApi {
  readonly rest: Rest;
  readonly machines: RestResource<Machine>;
  readonly clusters: RestResource<Cluster>;
  readonly nodes: RestResource<NodeView>;
  readonly leases: LeaseRenewal<Lease>;
  private readonly events: RestResource<KubeEvent>;

  constructor(kubeconfig: string | undefined, machine: string) {
    this.rest = new Rest(loadRestConfig(kubeconfig), `liken-agent/${machine}`);
    const fm = `liken-agent-${machine}`;
    const crd = `/apis/${API_VERSION}`;
    this.machines = new RestResource(this.rest, MACHINE_KIND, `${crd}/${MACHINE_PLURAL}`, fm);
    this.clusters = new RestResource(this.rest, CLUSTER_KIND, `${crd}/${CLUSTER_PLURAL}`, fm);
    this.nodes = new RestResource(this.rest, "Node", "/api/v1/nodes", fm);
    // Events about a cluster-scoped object live in "default" (config/rbac/agent.yaml).
    this.events = new RestResource(this.rest, "Event", "/api/v1/namespaces/default/events", fm);
    const leases = new RestResource<Lease>(
      this.rest,
      "Lease",
      `/apis/coordination.k8s.io/v1/namespaces/${HEARTBEAT_NAMESPACE}/leases`,
      fm,
    );
    const spec = (holder: string, now: Date): Lease["spec"] => ({
      holderIdentity: holder,
      leaseDurationSeconds: LOST_AFTER_SECONDS,
      renewTime: microTime(now),
    });
    this.leases = new LeaseRenewal<Lease>({
      read: (name) => leases.find(name),
      create: (name, m, cluster, now) =>
        leases.create({
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: heartbeatLeaseMetadata(name, m, cluster),
          spec: spec(m, now),
        }),
      renew: (_name, base, m, now) =>
        leases.replace({ ...base, spec: { ...base.spec, ...spec(m, now) } }),
    });
  }

  /** An Event about this agent's Machine, for `kubectl describe machine` (best effort: throws). */
  async machineEvent(
    m: Machine,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ): Promise<void> {
    const now = new Date().toISOString();
    await this.events.create({
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: eventName(m.metadata.name, Date.now()), namespace: "default" },
      involvedObject: {
        apiVersion: API_VERSION,
        kind: MACHINE_KIND,
        name: m.metadata.name,
        ...(m.metadata.uid === undefined ? {} : { uid: m.metadata.uid }),
      },
      type,
      reason,
      // As the operator's Events (events.ts): events.k8s.io/v1 refuses a note over 1 KiB,
      // and the condition carries the whole message.
      message: message.slice(0, 1024),
      source: { component: "liken-agent" },
      reportingComponent: "liken-agent",
      reportingInstance: m.metadata.name.slice(0, 128),
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    });
  }

  /** The heartbeat (coordinator/heartbeat.ts calls this every heartbeatSeconds). */
  renew(machine: string, cluster: string): Promise<unknown> {
    return this.leases.renew(heartbeatLeaseName(machine), machine, cluster, new Date());
  }
}

/**
 * client-node's config for the drain and uncordon, loaded when first needed, reusing
 * connections as every liken client does (src/api/kubeconfig.ts). On Debian's nodejs the
 * kept-alive answers need the node-fetch repair the machine's bundle carries
 * (docs/adr/node-fetch-premature-close.md).
 */
export function kubeConfigWhenNeeded(kubeconfig: string | undefined): () => Promise<KubeConfig> {
  let kc: KubeConfig | undefined;
  return async () => {
    if (kc === undefined) {
      const { loadKubeConfig } = await import("../api/kubeconfig.js");
      kc = loadKubeConfig(kubeconfig);
    }
    return kc;
  };
}
