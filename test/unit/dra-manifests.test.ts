import { describe, expect, it } from "vitest";
import { identifyDriver } from "../../src/drain/drivers.js";
import {
  claimHolder,
  DRA_DRIVER,
  driverDaemonSet,
  driverKubeconfig,
  driverRbac,
  type DraSetup,
} from "../qemu/dra-manifests.js";
import { parse } from "yaml";

const setup: DraSetup = {
  namespace: "dra",
  node: "node-4",
  apiServer: { host: "10.0.2.100", port: 6443 },
  holderImage: "liken.local/workload:1",
  holderGraceSeconds: 7,
  holderLingerSeconds: 3,
  caPem: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
  tlsServerName: "kubernetes",
};

describe("the DRA test driver's manifests", () => {
  it("run a driver pod liken's drain recognises by its plugin directory", () => {
    const ds = driverDaemonSet(setup);
    const pod = {
      metadata: {
        uid: "u1",
        ownerReferences: [
          {
            apiVersion: "apps/v1",
            kind: "DaemonSet",
            name: "dra-test-driver",
            uid: "d",
            controller: true,
          },
        ],
      },
      spec: { ...ds.spec!.template.spec!, nodeName: setup.node },
    };
    expect(identifyDriver(DRA_DRIVER, [pod], {})).toEqual({
      driver: DRA_DRIVER,
      by: "plugin-dir",
      podUids: ["u1"],
    });
  });

  it("point the driver at the relay, on the host network", () => {
    const spec = driverDaemonSet(setup).spec!.template.spec!;
    expect(spec.hostNetwork).toBe(true);
    // The driver appends its own name to --datadir: the hostPath above is that result.
    expect(spec.containers[0]!.args).toContain("--datadir=/var/lib/kubelet/plugins");
    expect(spec.containers[0]!.env).toContainEqual({
      name: "KUBECONFIG",
      value: "/etc/liken-dra/kubeconfig",
    });
    expect(spec.volumes).toContainEqual({
      name: "kubeconfig",
      configMap: { name: driverKubeconfig(setup).metadata!.name },
    });
  });

  it("give the driver a kubeconfig naming the relay, the certificate's name and its own token", () => {
    // The serving certificate does not name the relay's address: the in-cluster config
    // (KUBERNETES_SERVICE_HOST) would fail its TLS verification.
    const kc = parse(driverKubeconfig(setup).data!.kubeconfig!) as {
      clusters: { cluster: Record<string, string> }[];
      users: { user: Record<string, string> }[];
    };
    expect(kc.clusters[0]!.cluster).toMatchObject({
      server: "https://10.0.2.100:6443",
      "tls-server-name": "kubernetes",
    });
    expect(kc.users[0]!.user).toEqual({
      tokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
    });
  });

  it("give the holder the grace period the scenario sees, and its claim", () => {
    const pod = claimHolder(setup);
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(7);
    expect(pod.spec!.containers[0]!.resources!.claims).toEqual([{ name: "dev" }]);
    expect(pod.spec!.containers[0]!.imagePullPolicy).toBe("Never");
    expect(pod.spec!.containers[0]!.args).toEqual(["3"]);
    // The scheduler allocates the claim: a pod bound by spec.nodeName would skip it.
    expect(pod.spec!.nodeName).toBeUndefined();
    expect(pod.spec!.nodeSelector).toEqual({ "kubernetes.io/hostname": "node-4" });
  });

  it("bind the DaemonSet's ServiceAccount to the driver's role", () => {
    const sa = driverDaemonSet(setup).spec!.template.spec!.serviceAccountName;
    const [account, , binding] = driverRbac(setup) as {
      metadata?: { name: string };
      subjects?: { name: string }[];
    }[];
    expect(account!.metadata!.name).toBe(sa);
    expect(binding!.subjects![0]!.name).toBe(sa);
  });
});
