// The drain plan's details that mutation testing (npm run test:mutation -- drain/plan) found
// no test for: what each pod left on the node is told, which drivers a planned pod carries,
// which drivers the plan reports, how a consumer that is not a pod is named, and which
// newcomers join a plan. drain-plan.test.ts has the waves themselves.
import { describe, expect, it } from "vitest";
import type { ResourceV1ResourceClaim, V1Pod } from "@kubernetes/client-node";
import { admitNewcomers, nextStep, planDrain } from "../../src/drain/plan.js";
import type { DriverPodSelectors } from "../../src/drain/drivers.js";
import { claim, GPU, GPU_PLUGIN_DIR, pod } from "./drain-fixtures.js";

const NODE = "node-a";
const NIC = "nic.example.com";
const FPGA = "fpga.example.com";
const driverPod = (name = "gpu-driver", extra: Partial<Parameters<typeof pod>[0]> = {}) =>
  pod({ name, daemonSet: true, hostPaths: [GPU_PLUGIN_DIR], ...extra });

const plan = (
  pods: V1Pod[],
  claims: ResourceV1ResourceClaim[] = [],
  selectors: DriverPodSelectors = {},
) => planDrain(NODE, { pods, claims }, selectors);

describe("what a pod the drain leaves is told", () => {
  const cases: {
    name: string;
    pods: V1Pod[];
    claims?: ResourceV1ResourceClaim[];
    want: string[];
  }[] = [
    {
      name: "a static pod",
      pods: [pod({ name: "etcd", mirror: true })],
      want: ["default/etcd mirror-pod: a static pod: its kubelet owns it"],
    },
    {
      name: "a finished pod names its phase",
      pods: [pod({ name: "job", phase: "Succeeded" })],
      want: ["default/job finished: phase Succeeded: nothing runs in it"],
    },
    {
      name: "a DaemonSet pod without claims",
      pods: [pod({ name: "exporter", daemonSet: true })],
      want: ["default/exporter daemonset-pod: a DaemonSet pod that runs no DRA driver"],
    },
    {
      name: "a DaemonSet pod that holds claims names them, and its driver stays for it",
      pods: [driverPod(), pod({ name: "ds-user", daemonSet: true, claims: ["c1", "c2"] })],
      claims: [
        claim({ name: "c1", driver: GPU, reservedFor: ["ds-user"] }),
        claim({ name: "c2", driver: GPU, reservedFor: ["ds-user"] }),
      ],
      want: [
        "default/ds-user daemonset-pod: a DaemonSet pod that runs no DRA driver; it holds default/c1, default/c2",
        "default/gpu-driver driver-of-left-pod: runs driver gpu.example.com, which serves default/c2 (held by default/ds-user), a pod the drain leaves",
      ],
    },
  ];
  it.each(cases)("$name", ({ pods, claims, want }) => {
    const left = plan(pods, claims).left.map((l) => `${l.pod} ${l.reason}: ${l.detail}`);
    expect(left.sort()).toEqual(want);
  });

  it("a pod left is planned in no wave, and every pod seen is remembered", () => {
    const p = plan([pod({ name: "etcd", mirror: true }), pod({ name: "web" })]);
    expect(p.waves).toEqual([
      {
        name: "workloads",
        pods: [{ uid: "uid-web", pod: "default/web", wave: "workloads", claims: [], drivers: [] }],
      },
    ]);
    expect(p.podUids).toEqual(["uid-etcd", "uid-web"]);
  });
});

describe("the drivers a planned pod carries", () => {
  it("a pod that runs two drivers carries both, and waits for the claims of either", () => {
    const both = pod({
      name: "both",
      daemonSet: true,
      hostPaths: [GPU_PLUGIN_DIR, `/var/lib/kubelet/plugins/${NIC}`],
    });
    const claims = [
      claim({ name: "g", driver: GPU, reservedFor: [] }),
      claim({ name: "n", driver: NIC, reservedFor: ["user"] }),
    ];
    const p = plan([both], claims);
    expect(p.waves.map((w) => [w.name, w.pods.map((x) => x.drivers)])).toEqual([
      ["drivers", [[GPU, NIC]]],
    ]);
    const step = nextStep(p, { pods: [both], claims });
    expect(step).toMatchObject({ wave: "drivers", evict: [], waiting: [{ pod: "default/both" }] });
  });

  it("a candidate of unidentified drivers carries their names; a workload carries none", () => {
    const p = plan(
      [
        pod({ name: "maybe", hostPaths: ["/var/lib/kubelet"] }),
        pod({ name: "a", claims: ["c1"] }),
        pod({ name: "b", claims: ["c2"] }),
      ],
      [
        claim({ name: "c1", driver: FPGA, reservedFor: ["a"] }),
        claim({ name: "c2", driver: NIC, reservedFor: ["b"] }),
      ],
    );
    expect(
      Object.fromEntries(p.waves.flatMap((w) => w.pods.map((x) => [x.pod, x.drivers]))),
    ).toEqual({
      "default/maybe": [FPGA, NIC],
      "default/a": [],
      "default/b": [],
    });
  });

  it("a driver identified by its plugin directory is not unidentified: a pod that mounts / is a workload", () => {
    const p = plan(
      [driverPod(), pod({ name: "debug", hostPaths: ["/"] }), pod({ name: "u", claims: ["c1"] })],
      [claim({ name: "c1", driver: GPU, reservedFor: ["u"] })],
    );
    expect(p.waves.map((w) => [w.name, w.pods.map((x) => x.pod)])).toEqual([
      ["workloads", ["default/debug", "default/u"]],
      ["drivers", ["default/gpu-driver"]],
    ]);
  });
});

describe("the drivers the plan reports", () => {
  const selectors: DriverPodSelectors = {
    [FPGA]: { selector: { matchLabels: { app: "fpga" } } },
    [NIC]: { selector: { matchLabels: { app: "nic" } } },
  };

  it("a configured driver with neither a claim nor a pod here is not reported; one with a pod is", () => {
    const p = plan([pod({ name: "fpga-plugin", labels: { app: "fpga" } })], [], selectors);
    expect(p.drivers).toEqual([
      { driver: FPGA, by: "selector", pods: ["default/fpga-plugin"], claims: [] },
    ]);
  });

  it("an unidentified driver is reported only when a claim here names it", () => {
    const p = plan(
      [pod({ name: "u", claims: ["c1"] })],
      [claim({ name: "c1", driver: GPU, reservedFor: ["u"] })],
      selectors,
    );
    expect(p.drivers).toEqual([
      { driver: GPU, by: "unidentified", pods: [], claims: ["default/c1"] },
    ]);
  });
});

describe("how a waiting driver names what holds it", () => {
  it("a consumer that is not a pod on this node is named by namespace, name, resource and uid", () => {
    const c = claim({ name: "c1", driver: GPU, reservedFor: [] });
    c.status!.reservedFor = [{ resource: "jobs", name: "batch", uid: "uid-batch" }];
    const p = plan([driverPod()], [c]);
    const step = nextStep(p, { pods: [driverPod()], claims: [c] });
    expect(step).toMatchObject({
      waiting: [
        { claims: [{ claim: "default/c1", consumers: ["default/batch (jobs, uid uid-batch)"] }] },
      ],
    });
  });

  it("a consumer that is a pod on the node is named as the pod", () => {
    const p = plan([driverPod()], [claim({ name: "c1", driver: GPU, reservedFor: [] })]);
    const late = pod({ name: "late", claims: ["c9"] }); // came after the plan
    const c = claim({ name: "c9", driver: GPU, reservedFor: ["late"] });
    expect(nextStep(p, { pods: [driverPod(), late], claims: [c] })).toMatchObject({
      kind: "work",
      waiting: [{ claims: [{ claim: "default/c9", driver: GPU, consumers: ["default/late"] }] }],
    });
  });
});

describe("what a driver waits for", () => {
  it("a multi-node claim still listing a pod that ran here and is gone holds the driver", () => {
    // This node's kubelet has yet to answer that pod's unprepare call.
    const user = pod({ name: "user", claims: ["net"] });
    const net = claim({ name: "net", driver: GPU, node: null, reservedFor: ["user"] });
    const p = plan([driverPod(), user], [net]);
    expect(nextStep(p, { pods: [driverPod()], claims: [net] })).toMatchObject({
      kind: "work",
      wave: "drivers",
      evict: [],
      waiting: [{ pod: "default/gpu-driver", why: "claims-reserved" }],
    });
  });

  it("a pod that holds a claim is a workload even when it may run a plugin", () => {
    const p = plan(
      [pod({ name: "user", claims: ["c1"], hostPaths: ["/var/lib/kubelet"] })],
      [claim({ name: "c1", driver: FPGA, reservedFor: ["user"] })],
    );
    expect(p.waves.map((w) => [w.name, w.pods.map((x) => x.pod)])).toEqual([
      ["workloads", ["default/user"]],
    ]);
  });
});

describe("admitNewcomers", () => {
  it("a DaemonSet pod that replaces an evicted driver is not planned, even while its claim is listed", () => {
    const c1 = claim({ name: "c1", driver: GPU, reservedFor: ["train"] });
    const first = plan([driverPod(), pod({ name: "train", claims: ["c1"] })], [c1]);
    const next = admitNewcomers(first, { pods: [driverPod("gpu-driver-new")], claims: [c1] }, {});
    expect(next.waves).toEqual(first.waves);
    expect(next.left).toEqual(first.left);
  });

  it("a late workload joins its wave; a late static pod is left and remembered", () => {
    const first = plan([pod({ name: "web" })]);
    const lateWeb = pod({ name: "late-web" });
    const lateStatic = pod({ name: "late-static", mirror: true });
    const next = admitNewcomers(
      first,
      { pods: [pod({ name: "web" }), lateWeb, lateStatic], claims: [] },
      {},
    );
    expect(next.waves.map((w) => [w.name, w.pods.map((x) => x.pod)])).toEqual([
      ["workloads", ["default/web", "default/late-web"]],
    ]);
    expect(next.left.map((l) => `${l.pod} ${l.reason}`)).toEqual([
      "default/late-static mirror-pod",
    ]);
    expect(next.podUids).toEqual(["uid-web", "uid-late-web", "uid-late-static"]);
  });

  it("the plan's own left pods stay in the list", () => {
    const first = plan([pod({ name: "etcd", mirror: true })]);
    const next = admitNewcomers(first, { pods: [pod({ name: "late" })], claims: [] }, {});
    expect(next.left.map((l) => l.pod)).toEqual(["default/etcd"]);
  });
});
