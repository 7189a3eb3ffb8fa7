import { describe, expect, it } from "vitest";
import { identifyDriver } from "../../src/drain/drivers.js";
import {
  claimHolder,
  DRA_DRIVER,
  driverDaemonSet,
  driverRbac,
  type DraSetup,
} from "../qemu/dra-manifests.js";

const setup: DraSetup = {
  namespace: "dra",
  node: "node-4",
  apiServer: { host: "10.0.2.100", port: 6443 },
  holderImage: "liken.local/workload:1",
  holderGraceSeconds: 7,
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
      name: "KUBERNETES_SERVICE_HOST",
      value: "10.0.2.100",
    });
  });

  it("give the holder the grace period the scenario sees, and its claim", () => {
    const pod = claimHolder(setup);
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(7);
    expect(pod.spec!.containers[0]!.resources!.claims).toEqual([{ name: "dev" }]);
    expect(pod.spec!.containers[0]!.imagePullPolicy).toBe("Never");
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
