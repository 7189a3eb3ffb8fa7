// What the agent asks of the API server, over the lean REST client (api/rest.ts): its Machine,
// its Cluster, its Node, its heartbeat Lease. No @kubernetes/client-node here: the idle agent
// must stay small (docs/adr/agent-lean-api-client.md); the drain, which needs client-node,
// loads it when a turn is held.
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
  metadata: { name: string; resourceVersion?: string };
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

  constructor(kubeconfig: string | undefined, machine: string) {
    this.rest = new Rest(loadRestConfig(kubeconfig), `liken-agent/${machine}`);
    const fm = `liken-agent-${machine}`;
    const crd = `/apis/${API_VERSION}`;
    this.machines = new RestResource(this.rest, MACHINE_KIND, `${crd}/${MACHINE_PLURAL}`, fm);
    this.clusters = new RestResource(this.rest, CLUSTER_KIND, `${crd}/${CLUSTER_PLURAL}`, fm);
    this.nodes = new RestResource(this.rest, "Node", "/api/v1/nodes", fm);
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

  /** The heartbeat (coordinator/heartbeat.ts calls this every heartbeatSeconds). */
  renew(machine: string, cluster: string): Promise<unknown> {
    return this.leases.renew(heartbeatLeaseName(machine), machine, cluster, new Date());
  }
}
