// The machine scenario's check that the kubelet stopped each evicted pod within its grace
// (test/qemu/drain-grace.ts), on hand-made watch records and Killing Events: each row breaks
// one promise. Times are on two clocks as on a real run: the eviction's on the API server's,
// the Killing and finishedAt on the kubelet's (the guest's), `skew` seconds behind.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { graceVerdict } from "../qemu/drain-grace.js";
import type { Recorded } from "../support/drain-invariants.js";
import { killingTimes } from "../qemu/kubelet-killing.js";
import type { CoreV1Event } from "@kubernetes/client-node";

const NODE = "machine-1";
const LINGER = 3;
const T0 = Date.parse("2026-12-04T08:00:00Z");
const at = (s: number): string => new Date(T0 + s * 1000).toISOString().replace(".000", "");

interface Stop {
  /** Seconds after T0 the eviction asked for the stop (API server's clock). */
  requested: number;
  grace: number;
  /** Seconds after T0 the kubelet posted Killing (its clock); undefined: no such Event. */
  killed?: number;
  /** Seconds after T0 the container finished (kubelet's clock); undefined: no terminated state. */
  finished?: number;
  exitCode?: number;
  node?: string;
}

function podLog(name: string, s: Stop, rv: number): Recorded[] {
  const base: V1Pod = {
    metadata: { name, uid: `uid-${name}` },
    spec: { nodeName: s.node ?? NODE, containers: [] },
  };
  const deleting: V1Pod = {
    ...base,
    metadata: {
      ...base.metadata,
      deletionTimestamp: new Date(at(s.requested + s.grace)),
      deletionGracePeriodSeconds: s.grace,
    },
  };
  const out: Recorded[] = [
    { type: "ADDED", kind: "Pod", rv, obj: base },
    { type: "MODIFIED", kind: "Pod", rv: rv + 1, obj: deleting },
  ];
  if (s.finished !== undefined) {
    const terminated: V1Pod = {
      ...deleting,
      status: {
        containerStatuses: [
          {
            name: "main",
            image: "w",
            imageID: "",
            ready: false,
            restartCount: 0,
            state: {
              terminated: {
                exitCode: s.exitCode ?? 0,
                reason: s.exitCode ? "Error" : "Completed",
                finishedAt: new Date(at(s.finished)),
              },
            },
          },
        ],
      },
    };
    out.push({ type: "MODIFIED", kind: "Pod", rv: rv + 2, obj: terminated });
  }
  out.push({ type: "DELETED", kind: "Pod", rv: rv + 3, obj: deleting });
  return out;
}

function killingEvent(name: string, s: Stop, component = "kubelet"): CoreV1Event[] {
  if (s.killed === undefined) return [];
  return [
    {
      metadata: { name: `${name}.1` },
      involvedObject: { kind: "Pod", name, uid: `uid-${name}` },
      reason: "Killing",
      message: "Stopping container main",
      source: { component },
      firstTimestamp: new Date(at(s.killed)),
    },
  ];
}

/** A kubelet whose clock is `skew` s behind the API server's: its times move, the request's do not. */
const behind = (skew: number, s: Stop): Stop => ({
  ...s,
  ...(s.killed !== undefined ? { killed: s.killed - skew } : {}),
  ...(s.finished !== undefined ? { finished: s.finished - skew } : {}),
});

const ROWS: { name: string; stops: Stop[]; problem?: RegExp; component?: string }[] = [
  {
    name: "two pods stopped by the kubelet after the workload's linger, within grace",
    stops: [
      { requested: 0, grace: 10, killed: 0, finished: 3 },
      { requested: 20, grace: 10, killed: 21, finished: 25 },
    ],
  },
  {
    name: "the same, on a guest whose clock runs 4 s behind the host's (as CI saw)",
    stops: [
      behind(4, { requested: 0, grace: 10, killed: 0, finished: 3 }),
      behind(4, { requested: 20, grace: 10, killed: 21, finished: 25 }),
    ],
  },
  {
    name: "a pod with no terminated state (a simulator deleted it)",
    stops: [
      { requested: 0, grace: 10, killed: 0 },
      { requested: 20, grace: 10, killed: 20, finished: 23 },
    ],
    problem: /no terminated container state: no kubelet stopped it/,
  },
  {
    name: "a pod with no Killing Event from the kubelet",
    stops: [
      { requested: 0, grace: 10, finished: 3 },
      { requested: 20, grace: 10, killed: 20, finished: 23 },
    ],
    problem: /web-0 has no Killing Event from the kubelet/,
  },
  {
    name: "a Killing Event from another component is not the kubelet's",
    stops: [
      { requested: 0, grace: 10, killed: 0, finished: 3 },
      { requested: 20, grace: 10, killed: 20, finished: 23 },
    ],
    component: "liken",
    problem: /has no Killing Event from the kubelet/,
  },
  {
    name: "a pod that stopped sooner than the workload lingers (SIGKILL at once)",
    stops: [
      { requested: 0, grace: 10, killed: 0, finished: 0 },
      { requested: 20, grace: 10, killed: 20, finished: 23 },
    ],
    problem: /sooner than its workload's 3 s after SIGTERM/,
  },
  {
    name: "a pod killed at the end of its grace",
    stops: [
      { requested: 0, grace: 2, killed: 0, finished: 2, exitCode: 137 },
      { requested: 20, grace: 10, killed: 20, finished: 23 },
    ],
    problem: /exited 137 \(Error\), not 0/,
  },
  {
    name: "a pod that stopped past its grace",
    stops: [
      { requested: 0, grace: 3, killed: 0, finished: 6 },
      { requested: 20, grace: 10, killed: 20, finished: 23 },
    ],
    problem: /past its grace of 3 s/,
  },
  {
    name: "fewer pods left the node than expected (one was on another node)",
    stops: [
      { requested: 0, grace: 10, killed: 0, finished: 3 },
      { requested: 20, grace: 10, killed: 20, finished: 23, node: "spare" },
    ],
    problem: /1 pods left machine-1, expected 2/,
  },
];

describe("graceVerdict", () => {
  it.each(ROWS)("$name", ({ stops, problem, component }) => {
    const log = stops.flatMap((s, i) => podLog(`web-${i}`, s, 100 * (i + 1)));
    const events = stops.flatMap((s, i) => killingEvent(`web-${i}`, s, component));
    const v = graceVerdict(log, NODE, LINGER, 2, killingTimes(events));
    if (problem === undefined) {
      expect(v.problems).toEqual([]);
      expect(v.stops.map((s) => s.stoppedAfterS)).toEqual([3, 4]);
    } else {
      expect(v.problems.join("; ")).toMatch(problem);
    }
  });
});
