// What the machine scenario applies to run the DRA test driver on the real node and hold one
// of its claims there: the driver's DaemonSet (kubelet-plugin mode), its DeviceClass, a
// ResourceClaimTemplate and the claim holder. Pure, so a unit test checks that liken's drain
// recognises the driver pod (src/drain/drivers.ts, rule 2: its plugin directory) and that the
// holder waits on the grace period the scenario measures. The scenario applies them
// (machine-dra.ts).
//
// The guest reaches the API server only through the relay address its kubelet uses, and the
// API server's serving certificate does not name that address, so the in-cluster config
// (KUBERNETES_SERVICE_HOST/PORT) fails TLS verification. The driver runs with hostNetwork and
// a kubeconfig (a ConfigMap, KUBECONFIG) naming the relay, the cluster's CA and the server name
// the certificate has, as the kubelet's kubeconfig does, and authenticating with the pod's own
// projected ServiceAccount token (docs/machine.md, "A DRA driver on the node").
import type { V1ConfigMap, V1DaemonSet, V1Pod } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { KUBELET_PLUGIN_REGISTRY_DIR, KUBELET_PLUGINS_DIR } from "../../src/drain/drivers.js";
import { DRA_DRIVER_IMAGE, DRA_DRIVER_POD_PREFIX } from "../../testbed/machine/node.js";

export const DRA_DRIVER = "test-driver.liken.local";
export { DRA_DRIVER_IMAGE };
/** Where the driver container reads its kubeconfig (the ConfigMap driverKubeconfig). */
const KUBECONFIG_DIR = "/etc/liken-dra";
/** The token kubelet projects into every pod with a ServiceAccount (automount). */
const SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/** The test driver writes CDI specs here; containerd reads them (cdi_spec_dirs). */
const CDI_DIR = "/var/run/cdi";

export interface DraSetup {
  namespace: string;
  node: string;
  /** host:port of the relay the guest reaches the API server through. */
  apiServer: { host: string; port: number };
  /** The CA that signed the API server's serving certificate, and the name that one carries. */
  caPem: string;
  tlsServerName: string;
  holderImage: string;
  /** The holder's terminationGracePeriodSeconds, which the scenario sees in its stop time. */
  holderGraceSeconds: number;
  /** How long the holder (the workload image) stays after SIGTERM. */
  holderLingerSeconds: number;
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
  const kubeconfig = {
    volume: { name: "kubeconfig", configMap: { name: "dra-test-driver-kubeconfig" } },
    mount: { name: "kubeconfig", mountPath: KUBECONFIG_DIR, readOnly: true },
  };
  const labels = { app: "dra-test-driver" };
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: DRA_DRIVER_POD_PREFIX.slice(0, -1), namespace: s.namespace },
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
                { name: "KUBECONFIG", value: `${KUBECONFIG_DIR}/kubeconfig` },
              ],
              securityContext: { privileged: true },
              volumeMounts: [...dirs, kubeconfig].map((d) => d.mount),
            },
          ],
          volumes: [...dirs, kubeconfig].map((d) => d.volume),
        },
      },
    },
  };
}

/**
 * The driver's kubeconfig: the relay's address, the cluster's CA and the serving certificate's
 * name (the relay's address is not among its names), and the pod's own ServiceAccount token
 * (client-go reads the file again as the kubelet renews it).
 */
export function driverKubeconfig(s: DraSetup): V1ConfigMap {
  const kubeconfig = stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "liken",
        cluster: {
          server: `https://${s.apiServer.host}:${s.apiServer.port}`,
          "certificate-authority-data": Buffer.from(s.caPem).toString("base64"),
          "tls-server-name": s.tlsServerName,
        },
      },
    ],
    users: [{ name: "driver", user: { tokenFile: SA_TOKEN } }],
    contexts: [{ name: "liken", context: { cluster: "liken", user: "driver" } }],
    "current-context": "liken",
  });
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "dra-test-driver-kubeconfig", namespace: s.namespace },
    data: { kubeconfig },
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
      // Through the scheduler, not spec.nodeName: only the scheduler allocates the claim.
      nodeSelector: { "kubernetes.io/hostname": s.node },
      terminationGracePeriodSeconds: s.holderGraceSeconds,
      resourceClaims: [{ name: "dev", resourceClaimTemplateName: "dra-holder" }],
      containers: [
        {
          name: "hold",
          image: s.holderImage,
          imagePullPolicy: "Never",
          args: [String(s.holderLingerSeconds)],
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
