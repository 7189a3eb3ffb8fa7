// The one pinned control plane that tests and the lab run: the same binaries a cluster runs,
// built from the Go module proxy. Bump these together; the cache is keyed by them.

export const KUBERNETES_VERSION = "1.35.4";
export const ETCD_VERSION = "3.6.16";
export const KWOK_VERSION = "0.8.0";

/**
 * The staging modules k8s.io/kubernetes requires at v0.0.0 and replaces with local paths.
 * A module that requires k8s.io/kubernetes must map each to its published v0.<minor>.<patch>
 * (docs/adr/control-plane-for-tests.md, "What the build relies on").
 */
export const STAGING_MODULES = [
  "api",
  "apiextensions-apiserver",
  "apimachinery",
  "apiserver",
  "cli-runtime",
  "client-go",
  "cloud-provider",
  "cluster-bootstrap",
  "code-generator",
  "component-base",
  "component-helpers",
  "controller-manager",
  "cri-api",
  "cri-client",
  "csi-translation-lib",
  "dynamic-resource-allocation",
  "endpointslice",
  "externaljwt",
  "kms",
  "kube-aggregator",
  "kube-controller-manager",
  "kube-proxy",
  "kube-scheduler",
  "kubectl",
  "kubelet",
  "metrics",
  "mount-utils",
  "pod-security-admission",
  "sample-apiserver",
] as const;

/** etcd's server module replaces its sibling modules with local paths; pin them to the release. */
export const ETCD_SIBLING_MODULES = ["api/v3", "client/pkg/v3", "client/v3", "pkg/v3"] as const;

export const BINARIES = [
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kubectl",
  "etcd",
  "kwok",
] as const;
export type Binary = (typeof BINARIES)[number];

/**
 * The tools built from the Go module proxy into the same cache (tools.ts): Helm for the chart,
 * promtool to check the operator's metrics and liken's alert rules, the Prometheus server (same
 * version) to prove the alerts and the dashboard on a rollout, umoci to pack the operator image,
 * runc to run it.
 * Prometheus publishes its Go module as v0.<major><minor>.<patch>: 3.16.0 is v0.316.0.
 */
export const HELM_VERSION = "4.3.2";
export const PROMETHEUS_VERSION = "3.16.0";
export const UMOCI_VERSION = "0.6.0";
export const RUNC_VERSION = "1.5.3";
/** desync, bench:delta's anchor (the module proxy serves this version but lists none). */
export const DESYNC_VERSION = "0.9.6";
