// Builders for the pod and claim objects the drain's pure functions read: only the fields
// the API server fills and the drain looks at, shaped exactly as in the API.
import type { ResourceV1ResourceClaim, V1Pod } from "@kubernetes/client-node";

export interface PodSpecLite {
  name: string;
  ns?: string;
  daemonSet?: boolean;
  mirror?: boolean;
  phase?: string;
  priorityClassName?: string;
  priority?: number;
  hostPaths?: string[];
  emptyDir?: boolean;
  /** Claims by name (spec.resourceClaims[].resourceClaimName). */
  claims?: string[];
  /** Claims from templates: [podClaimName, generated claim name]. */
  templateClaims?: [string, string][];
  labels?: Record<string, string>;
  deleting?: boolean;
}

export function pod(s: PodSpecLite): V1Pod {
  const ns = s.ns ?? "default";
  return {
    metadata: {
      name: s.name,
      namespace: ns,
      uid: `uid-${s.name}`,
      labels: s.labels ?? {},
      annotations: s.mirror ? { "kubernetes.io/config.mirror": "abc" } : {},
      ownerReferences: s.daemonSet
        ? [
            {
              apiVersion: "apps/v1",
              kind: "DaemonSet",
              name: "ds",
              uid: "ds-uid",
              controller: true,
            },
          ]
        : [
            {
              apiVersion: "apps/v1",
              kind: "ReplicaSet",
              name: "rs",
              uid: "rs-uid",
              controller: true,
            },
          ],
      ...(s.deleting ? { deletionTimestamp: new Date() } : {}),
    },
    spec: {
      nodeName: "node-a",
      containers: [{ name: "c", image: "x" }],
      ...(s.priorityClassName !== undefined ? { priorityClassName: s.priorityClassName } : {}),
      ...(s.priority !== undefined ? { priority: s.priority } : {}),
      volumes: [
        ...(s.hostPaths ?? []).map((p, i) => ({ name: `v${i}`, hostPath: { path: p } })),
        ...(s.emptyDir ? [{ name: "scratch", emptyDir: {} }] : []),
      ],
      resourceClaims: [
        ...(s.claims ?? []).map((c) => ({ name: c, resourceClaimName: c })),
        ...(s.templateClaims ?? []).map(([n]) => ({ name: n, resourceClaimTemplateName: "tpl" })),
      ],
    },
    status: {
      phase: s.phase ?? "Running",
      resourceClaimStatuses: (s.templateClaims ?? []).map(([n, c]) => ({
        name: n,
        resourceClaimName: c,
      })),
    },
  };
}

export interface ClaimSpecLite {
  name: string;
  ns?: string;
  driver: string;
  /** The node the allocation is tied to; "node-a" unless given (null: no node selector). */
  node?: string | null;
  /** Names of the pods (uid-<name>) in status.reservedFor. */
  reservedFor?: string[];
}

export function claim(s: ClaimSpecLite): ResourceV1ResourceClaim {
  const node = s.node === undefined ? "node-a" : s.node;
  return {
    metadata: { name: s.name, namespace: s.ns ?? "default", uid: `claim-${s.name}` },
    spec: { devices: { requests: [] } },
    status: {
      allocation: {
        devices: { results: [{ request: "r", driver: s.driver, pool: "p", device: "d0" }] },
        ...(node === null
          ? {}
          : {
              nodeSelector: {
                nodeSelectorTerms: [
                  { matchFields: [{ key: "metadata.name", operator: "In", values: [node] }] },
                ],
              },
            }),
      },
      reservedFor: (s.reservedFor ?? []).map((p) => ({
        resource: "pods",
        name: p,
        uid: `uid-${p}`,
      })),
    },
  };
}

export const GPU = "gpu.example.com";
export const GPU_PLUGIN_DIR = `/var/lib/kubelet/plugins/${GPU}`;
