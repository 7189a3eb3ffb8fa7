// What the machine scenario applies to run the DRA test driver on the real node and hold one
// of its claims there: the driver's DaemonSet (kubelet-plugin mode), its DeviceClass, a
// ResourceClaimTemplate and the claim holder. Pure, so a unit test checks that liken's drain
// recognises the driver pod (src/drain/drivers.ts, rule 2: its plugin directory) and that the
// holder waits on the grace period the scenario measures. Not yet applied by the scenario.
//
// The guest reaches the API server only through the relay address its kubelet uses, so the
// driver runs with hostNetwork and the in-cluster env vars pointed at that address
// (docs/machine.md, "A DRA driver on the node").
import type { V1DaemonSet, V1Pod } from "@kubernetes/client-node";
import { KUBELET_PLUGIN_REGISTRY_DIR, KUBELET_PLUGINS_DIR } from "../../src/drain/drivers.js";

export const DRA_DRIVER = "test-driver.liken.local";
export const DRA_DRIVER_IMAGE = "liken.local/dra-test-driver:1";
/** The test driver writes CDI specs here; containerd reads them (cdi_spec_dirs). */
const CDI_DIR = "/var/run/cdi";

export interface DraSetup {
  namespace: string;
  node: string;
  /** host:port of the relay the guest reaches the API server through. */
  apiServer: { host: string; port: number };
  holderImage: string;
  /** The holder's terminationGracePeriodSeconds, which the scenario sees in its stop time. */
  holderGraceSeconds: number;
}

const hostDir = (name: string, path: string) => ({
  volume: { name, hostPath: { path, type: "DirectoryOrCreate" } },
  mount: { name, mountPath: path },
});

export function driverDaemonSet(s: DraSetup): V1DaemonSet {
  const dirs = [
    hostDir("registry", KUBELET_PLUGIN_REGISTRY_DIR),
    hostDir("plugin", `${KUBELET_PLUGINS_DIR}/${DRA_DRIVER}`),
    hostDir("cdi", CDI_DIR),
  ];
  const labels = { app: "dra-test-driver" };
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "dra-test-driver", namespace: s.namespace },
    spec: {
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          nodeSelector: { "kubernetes.io/hostname": s.node },
          hostNetwork: true,
          serviceAccountName: "dra-test-driver",
          containers: [
            {
              name: "plugin",
              image: DRA_DRIVER_IMAGE,
              imagePullPolicy: "Never",
              args: [
                "-v=3",
                "kubelet-plugin",
                `--drivername=${DRA_DRIVER}`,
                `--node-name=$(NODE_NAME)`,
                `--cdi-dir=${CDI_DIR}`,
                // The driver appends its name to --datadir (app/server.go).
                `--datadir=${KUBELET_PLUGINS_DIR}`,
                `--plugin-registration-path=${KUBELET_PLUGIN_REGISTRY_DIR}`,
              ],
              env: [
                { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
                { name: "KUBERNETES_SERVICE_HOST", value: s.apiServer.host },
                { name: "KUBERNETES_SERVICE_PORT", value: String(s.apiServer.port) },
              ],
              securityContext: { privileged: true },
              volumeMounts: dirs.map((d) => d.mount),
            },
          ],
          volumes: dirs.map((d) => d.volume),
        },
      },
    },
  };
}

export function deviceClass(): object {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "DeviceClass",
    metadata: { name: DRA_DRIVER },
    spec: { selectors: [{ cel: { expression: `device.driver == "${DRA_DRIVER}"` } }] },
  };
}

export function claimTemplate(s: DraSetup): object {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceClaimTemplate",
    metadata: { name: "dra-holder", namespace: s.namespace },
    spec: {
      spec: { devices: { requests: [{ name: "dev", exactly: { deviceClassName: DRA_DRIVER } }] } },
    },
  };
}

export function claimHolder(s: DraSetup): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "dra-holder", namespace: s.namespace, labels: { app: "dra-holder" } },
    spec: {
      nodeName: s.node,
      terminationGracePeriodSeconds: s.holderGraceSeconds,
      resourceClaims: [{ name: "dev", resourceClaimTemplateName: "dra-holder" }],
      containers: [
        {
          name: "hold",
          image: s.holderImage,
          imagePullPolicy: "Never",
          resources: { claims: [{ name: "dev" }] },
        },
      ],
    },
  };
}

/**
 * The driver's identity: it publishes its node's ResourceSlice (owned by the Node, so it reads
 * the Node) and reads the claims the kubelet hands it (k8s.io/dynamic-resource-allocation
 * kubeletplugin and resourceslice helpers).
 */
export function driverRbac(s: DraSetup): object[] {
  const name = "dra-test-driver";
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: s.namespace } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: `liken-${name}` },
      rules: [
        {
          apiGroups: ["resource.k8s.io"],
          resources: ["resourceslices"],
          verbs: [
            "get",
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
          ],
        },
        {
          apiGroups: ["resource.k8s.io"],
          resources: ["resourceclaims"],
          verbs: ["get", "list", "watch"],
        },
        { apiGroups: [""], resources: ["nodes"], verbs: ["get"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: `liken-${name}` },
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: `liken-${name}`,
      },
      subjects: [{ kind: "ServiceAccount", name, namespace: s.namespace }],
    },
  ];
}
