import { describe, expect, it } from "vitest";
import type { ResourceV1ResourceClaim, V1Pod } from "@kubernetes/client-node";
import {
  admitNewcomers,
  nextStep,
  planDrain,
  type DrainPlan,
  type Step,
} from "../../src/drain/plan.js";
import type { DriverPodSelectors } from "../../src/drain/drivers.js";
import { claim, GPU, GPU_PLUGIN_DIR, pod } from "./drain-fixtures.js";

const NODE = "node-a";
const driverPod = (name = "gpu-driver", extra: Partial<Parameters<typeof pod>[0]> = {}) =>
  pod({ name, daemonSet: true, hostPaths: [GPU_PLUGIN_DIR], ...extra });

/** The plan as `wave: [pods]` plus `left: {pod: reason}`, the shape people reason in. */
function shape(plan: DrainPlan) {
  return {
    waves: Object.fromEntries(plan.waves.map((w) => [w.name, w.pods.map((p) => p.pod)])),
    left: Object.fromEntries(plan.left.map((l) => [l.pod, l.reason])),
  };
}

describe("planDrain: which pod leaves in which wave", () => {
  const cases: {
    name: string;
    pods: V1Pod[];
    claims?: ResourceV1ResourceClaim[];
    selectors?: DriverPodSelectors;
    waves: Record<string, string[]>;
    left?: Record<string, string>;
  }[] = [
    {
      name: "an empty node has nothing to do",
      pods: [],
      waves: {},
    },
    {
      name: "mirror, finished and DaemonSet pods stay; workloads and emptyDir pods leave",
      pods: [
        pod({ name: "etcd", mirror: true }),
        pod({ name: "job", phase: "Succeeded" }),
        pod({ name: "crashed", phase: "Failed" }),
        pod({ name: "node-exporter", daemonSet: true }),
        pod({ name: "web" }),
        pod({ name: "cache", emptyDir: true }),
      ],
      waves: { workloads: ["default/web", "default/cache"] },
      left: {
        "default/etcd": "mirror-pod",
        "default/job": "finished",
        "default/crashed": "finished",
        "default/node-exporter": "daemonset-pod",
      },
    },
    {
      name: "critical pods (by class or by value) leave after the others",
      pods: [
        pod({ name: "dns", priorityClassName: "system-cluster-critical" }),
        pod({ name: "proxy", priorityClassName: "system-node-critical" }),
        pod({ name: "valued", priority: 2_000_000_000 }),
        pod({ name: "almost", priority: 1_999_999_999 }),
        pod({ name: "web" }),
      ],
      waves: {
        workloads: ["default/almost", "default/web"],
        "critical-workloads": ["default/dns", "default/proxy", "default/valued"],
      },
    },
    {
      name: "claim holders leave with the workloads, the driver DaemonSet pod after them",
      pods: [
        driverPod(),
        pod({ name: "train", templateClaims: [["gpu", "train-gpu-x1"]] }),
        pod({ name: "infer", claims: ["shared"] }),
      ],
      claims: [
        claim({ name: "train-gpu-x1", driver: GPU, reservedFor: ["train"] }),
        claim({ name: "shared", driver: GPU, reservedFor: ["infer"] }),
      ],
      waves: { workloads: ["default/train", "default/infer"], drivers: ["default/gpu-driver"] },
    },
    {
      name: "a critical driver leaves after the non-critical drivers",
      pods: [
        driverPod("gpu-driver", { priorityClassName: "system-node-critical" }),
        pod({
          name: "nic-driver",
          daemonSet: true,
          hostPaths: ["/var/lib/kubelet/plugins/nic.example.com"],
        }),
        pod({ name: "a", claims: ["c1"] }),
        pod({ name: "b", claims: ["c2"] }),
      ],
      claims: [
        claim({ name: "c1", driver: GPU, reservedFor: ["a"] }),
        claim({ name: "c2", driver: "nic.example.com", reservedFor: ["b"] }),
      ],
      waves: {
        workloads: ["default/a", "default/b"],
        drivers: ["default/nic-driver"],
        "critical-drivers": ["default/gpu-driver"],
      },
    },
    {
      name: "a DaemonSet pod holding a claim stays, and so does the driver that serves it",
      pods: [
        driverPod(),
        pod({ name: "ds-user", daemonSet: true, templateClaims: [["gpu", "ds-user-gpu"]] }),
        pod({ name: "train", claims: ["c1"] }),
      ],
      claims: [
        claim({ name: "ds-user-gpu", driver: GPU, reservedFor: ["ds-user"] }),
        claim({ name: "c1", driver: GPU, reservedFor: ["train"] }),
      ],
      waves: { workloads: ["default/train"] },
      left: { "default/gpu-driver": "driver-of-left-pod", "default/ds-user": "daemonset-pod" },
    },
    {
      name: "an unidentified driver: the pods that may run it leave last, others stay as usual",
      pods: [
        pod({ name: "user", claims: ["c1"] }),
        pod({ name: "maybe", hostPaths: ["/var/lib/kubelet"] }),
        pod({ name: "maybe-ds", daemonSet: true, hostPaths: ["/var/lib/kubelet/plugins"] }),
        pod({ name: "unrelated-ds", daemonSet: true, hostPaths: ["/var/log"] }),
        pod({ name: "web" }),
      ],
      claims: [claim({ name: "c1", driver: "fpga.example.com", reservedFor: ["user"] })],
      waves: {
        workloads: ["default/user", "default/web"],
        "driver-candidates": ["default/maybe", "default/maybe-ds"],
      },
      left: { "default/unrelated-ds": "daemonset-pod" },
    },
    {
      name: "without an unidentified driver, a pod that mounts the plugin dirs is a workload",
      pods: [pod({ name: "debug", hostPaths: ["/"] })],
      waves: { workloads: ["default/debug"] },
    },
    {
      name: "a configured selector names a driver that runs as a Deployment",
      pods: [
        pod({ name: "fpga-plugin", labels: { app: "fpga" } }),
        pod({ name: "user", claims: ["c1"] }),
      ],
      claims: [claim({ name: "c1", driver: "fpga.example.com", reservedFor: ["user"] })],
      selectors: { "fpga.example.com": { selector: { matchLabels: { app: "fpga" } } } },
      waves: { workloads: ["default/user"], drivers: ["default/fpga-plugin"] },
    },
    {
      name: "a claim allocated elsewhere and reserved elsewhere does not concern this node",
      pods: [driverPod(), pod({ name: "web" })],
      claims: [claim({ name: "far", driver: GPU, node: "node-b", reservedFor: ["other"] })],
      waves: { workloads: ["default/web"] },
      left: { "default/gpu-driver": "daemonset-pod" },
    },
  ];

  it.each(cases)("$name", (c) => {
    const plan = planDrain(NODE, { pods: c.pods, claims: c.claims ?? [] }, c.selectors ?? {});
    expect(shape(plan)).toEqual({ waves: c.waves, left: c.left ?? {} });
  });

  it("names how each driver was identified and the claims it serves", () => {
    const plan = planDrain(
      NODE,
      {
        pods: [driverPod(), pod({ name: "a", claims: ["c1"] }), pod({ name: "b", claims: ["c2"] })],
        claims: [
          claim({ name: "c1", driver: GPU, reservedFor: ["a"] }),
          claim({ name: "c2", driver: "fpga.example.com", reservedFor: ["b"] }),
        ],
      },
      {},
    );
    expect(plan.drivers).toEqual([
      { driver: "fpga.example.com", by: "unidentified", pods: [], claims: ["default/c2"] },
      { driver: GPU, by: "plugin-dir", pods: ["default/gpu-driver"], claims: ["default/c1"] },
    ]);
  });
});

describe("nextStep: what to evict now and what waits", () => {
  const pods0 = [
    driverPod(),
    pod({ name: "train", templateClaims: [["gpu", "train-gpu"]] }),
    pod({ name: "web" }),
    pod({ name: "dns", priorityClassName: "system-cluster-critical" }),
  ];
  const claims0 = [claim({ name: "train-gpu", driver: GPU, reservedFor: ["train"] })];
  // Planned inside each test, never while the file is collected: a plan that throws must fail
  // a test (StrykerJS counts a file that fails to collect as no test at all, docs/testing.md).
  const plan = () => planDrain(NODE, { pods: pods0, claims: claims0 }, {});
  const without = (names: string[]) => pods0.filter((p) => !names.includes(p.metadata!.name!));
  const terminating = (name: string) =>
    pods0.map((p) =>
      p.metadata!.name === name
        ? { ...p, metadata: { ...p.metadata, deletionTimestamp: new Date() } }
        : p,
    );
  const brief = (s: Step) =>
    s.kind === "done"
      ? "done"
      : {
          wave: s.wave,
          evict: s.evict.map((p) => p.pod),
          waiting: s.waiting.map((w) => `${w.pod}: ${w.why}`),
        };

  const cases: { name: string; pods: V1Pod[]; claims: ResourceV1ResourceClaim[]; want: unknown }[] =
    [
      {
        name: "first the non-critical workloads, the claim holder among them",
        pods: pods0,
        claims: claims0,
        want: { wave: "workloads", evict: ["default/train", "default/web"], waiting: [] },
      },
      {
        name: "a terminating pod is waited for, not evicted again",
        pods: terminating("train"),
        claims: claims0,
        want: {
          wave: "workloads",
          evict: ["default/web"],
          waiting: ["default/train: terminating"],
        },
      },
      {
        name: "the critical wave starts only when the first is gone",
        pods: without(["train", "web"]),
        claims: claims0,
        want: { wave: "critical-workloads", evict: ["default/dns"], waiting: [] },
      },
      {
        name: "the holder is gone but its claim still lists it: the driver waits",
        pods: without(["train", "web", "dns"]),
        claims: claims0,
        want: {
          wave: "drivers",
          evict: [],
          waiting: ["default/gpu-driver: claims-reserved"],
        },
      },
      {
        name: "the claim no longer lists a consumer: the driver leaves",
        pods: without(["train", "web", "dns"]),
        claims: [claim({ name: "train-gpu", driver: GPU, reservedFor: [] })],
        want: { wave: "drivers", evict: ["default/gpu-driver"], waiting: [] },
      },
      {
        name: "the claim was deleted with its pod: the driver leaves",
        pods: without(["train", "web", "dns"]),
        claims: [],
        want: { wave: "drivers", evict: ["default/gpu-driver"], waiting: [] },
      },
      {
        name: "a new consumer that appeared on the node holds the driver back",
        pods: [...without(["train", "web", "dns"]), pod({ name: "late", claims: ["c9"] })],
        claims: [claim({ name: "c9", driver: GPU, reservedFor: ["late"] })],
        want: { wave: "drivers", evict: [], waiting: ["default/gpu-driver: claims-reserved"] },
      },
      {
        name: "a consumer on another node of a multi-node claim does not hold it back",
        pods: without(["train", "web", "dns"]),
        claims: [claim({ name: "net", driver: GPU, node: null, reservedFor: ["elsewhere"] })],
        want: { wave: "drivers", evict: ["default/gpu-driver"], waiting: [] },
      },
      {
        name: "every planned pod gone: done (a replacement DaemonSet pod is not the drain's)",
        pods: [driverPod("gpu-driver-new")],
        claims: [],
        want: "done",
      },
    ];

  it.each(cases)("$name", (c) => {
    expect(brief(nextStep(plan(), { pods: c.pods, claims: c.claims }))).toEqual(c.want);
  });

  it("says which claim and which consumer hold a driver back", () => {
    const step = nextStep(plan(), { pods: without(["train", "web", "dns"]), claims: claims0 });
    expect(step).toMatchObject({
      waiting: [
        {
          pod: "default/gpu-driver",
          why: "claims-reserved",
          claims: [
            {
              claim: "default/train-gpu",
              driver: GPU,
              consumers: ["default/train (pods, uid uid-train)"],
            },
          ],
        },
      ],
    });
  });

  it("holds the candidates of an unidentified driver until its claims are free", () => {
    const pods = [pod({ name: "user", claims: ["c1"] }), pod({ name: "maybe", hostPaths: ["/"] })];
    const reserved = [claim({ name: "c1", driver: "fpga.example.com", reservedFor: ["user"] })];
    const p = planDrain(NODE, { pods, claims: reserved }, {});
    const onlyMaybe = [pods[1]!];
    expect(brief(nextStep(p, { pods: onlyMaybe, claims: reserved }))).toEqual({
      wave: "driver-candidates",
      evict: [],
      waiting: ["default/maybe: claims-reserved"],
    });
    expect(brief(nextStep(p, { pods: onlyMaybe, claims: [] }))).toEqual({
      wave: "driver-candidates",
      evict: ["default/maybe"],
      waiting: [],
    });
  });
});

describe("admitNewcomers: pods that reach the node after the plan", () => {
  const first = [driverPod(), pod({ name: "train", claims: ["c1"] })];
  const claims = [claim({ name: "c1", driver: GPU, reservedFor: ["train"] })];
  const plan = () => planDrain(NODE, { pods: first, claims }, {}); // in each test, as above

  it("plans a late workload in its wave, so the driver still waits for it", () => {
    const late = pod({ name: "late-web" });
    const next = admitNewcomers(plan(), { pods: [first[0]!, late], claims: [] }, {});
    expect(shape(next).waves).toEqual({
      workloads: ["default/train", "default/late-web"],
      drivers: ["default/gpu-driver"],
    });
    expect(brief(nextStep(next, { pods: [first[0]!, late], claims: [] }))).toEqual({
      wave: "workloads",
      evict: ["default/late-web"],
    });
  });

  it("does not chase the DaemonSet pod that replaces an evicted driver", () => {
    const replacement = driverPod("gpu-driver-new");
    const next = admitNewcomers(plan(), { pods: [replacement], claims: [] }, {});
    expect(shape(next).waves).toEqual(shape(plan()).waves);
    expect(nextStep(next, { pods: [replacement], claims: [] })).toEqual({ kind: "done" });
  });

  it("returns the same plan when nobody came", () => {
    const p = plan();
    expect(admitNewcomers(p, { pods: first, claims }, {})).toBe(p);
  });
});

function brief(s: Step) {
  return s.kind === "done" ? "done" : { wave: s.wave, evict: s.evict.map((p) => p.pod) };
}
