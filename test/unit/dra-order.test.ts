// The machine scenario's check that the drain removed a DRA claim holder before its driver and
// the driver unprepared the claim while it ran (test/qemu/dra-order.ts), on hand-made watch
// records and driver log lines: each row breaks one promise.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { draVerdict, unpreparedAt, type DraRoles } from "../qemu/dra-order.js";
import type { Recorded } from "../support/drain-invariants.js";
import type { KillingTimes } from "../qemu/kubelet-killing.js";

const NODE = "machine-1";
const CLAIM = "0b8e6a4c-5f0e-4d55-9d1e-3c2f1a7e9b10";
const T0 = Date.parse("2026-12-04T08:00:00Z");
const at = (s: number): string => new Date(T0 + s * 1000).toISOString().replace(".000", "");
/** A line of the driver's pod log as the kubelet writes it (CRI format, nanoseconds). */
const criLine = (s: number, message: string): string =>
  `${new Date(T0 + s * 1000).toISOString().replace("Z", "123456Z")} stderr F ${message}`;
const removed = (s: number, uid = CLAIM): string =>
  criLine(
    s,
    `I1204 08:00:00.000000       1 kubeletplugin.go:479] "CDI file removed" logger="dra" path="/var/run/cdi/test-driver.cdi.k8s.io-${uid}-claim.json"`,
  );

interface PodSpec {
  name: string;
  app: string;
  /** Seconds after T0 the eviction asked for the stop (API server's clock); undefined: never asked. */
  requested?: number;
  /** Seconds after T0 of the kubelet's Killing (guest's clock); default `requested`; null: none. */
  killed?: number | null;
  grace?: number;
  /** Seconds after T0 the container finished; undefined: no terminated state recorded. */
  finished?: number;
}

function podLog(s: PodSpec, rv: number): Recorded[] {
  const base: V1Pod = {
    metadata: { name: s.name, uid: `uid-${s.name}`, labels: { app: s.app } },
    spec: { nodeName: NODE, containers: [] },
  };
  const out: Recorded[] = [{ type: "ADDED", kind: "Pod", rv, obj: base }];
  if (s.requested === undefined) return out;
  const grace = s.grace ?? 10;
  const deleting: V1Pod = {
    ...base,
    metadata: {
      ...base.metadata,
      deletionTimestamp: new Date(at(s.requested + grace)),
      deletionGracePeriodSeconds: grace,
    },
  };
  out.push({ type: "MODIFIED", kind: "Pod", rv: rv + 1, obj: deleting });
  if (s.finished !== undefined) {
    out.push({
      type: "MODIFIED",
      kind: "Pod",
      rv: rv + 2,
      obj: {
        ...deleting,
        status: {
          containerStatuses: [
            {
              name: "main",
              image: "w",
              imageID: "",
              ready: false,
              restartCount: 0,
              state: { terminated: { exitCode: 0, finishedAt: new Date(at(s.finished)) } },
            },
          ],
        },
      },
    });
  }
  out.push({ type: "DELETED", kind: "Pod", rv: rv + 3, obj: deleting });
  return out;
}

const ROLES: DraRoles = {
  node: NODE,
  holder: (p) => p.metadata?.labels?.app === "claim-holder",
  driver: (p) => p.metadata?.labels?.app === "dra-driver",
  claimUid: CLAIM,
};

const HOLDER: PodSpec = { name: "holder", app: "claim-holder", requested: 0, finished: 3 };
const DRIVER: PodSpec = { name: "driver-x7k2p", app: "dra-driver", requested: 8, finished: 9 };

const ROWS: {
  name: string;
  holder?: PodSpec;
  driver?: PodSpec;
  lines: string[];
  problem?: RegExp;
}[] = [
  {
    name: "holder stopped, claim unprepared, then the driver asked to stop",
    lines: [criLine(1, "I1204 starting"), removed(3.4)],
  },
  {
    name: "the unprepare in the holder's last second (finishedAt is truncated)",
    lines: [removed(2.5)],
  },
  {
    name: "the driver logged no unprepare of this claim",
    lines: [removed(4, "another-claim-uid")],
    problem: /the driver logged no "CDI file removed" for claim 0b8e6a4c/,
  },
  {
    name: "a log line not in the CRI format is not evidence",
    lines: [`"CDI file removed" path="/var/run/cdi/test-driver.cdi.k8s.io-${CLAIM}-claim.json"`],
    problem: /logged no "CDI file removed"/,
  },
  {
    name: "the claim unprepared before its holder stopped",
    lines: [removed(0.5)],
    problem: /unprepared claim .* 2\.5 s before its holder holder stopped/,
  },
  {
    name: "the driver stopped before the unprepare (driver removed first)",
    driver: { ...DRIVER, requested: 1, finished: 2 },
    lines: [removed(3.5)],
    problem:
      /2\.5 s after the kubelet began to stop its own pod driver-x7k2p: the drain removed the driver first/,
  },
  {
    name: "in order on a guest whose clock runs 6 s ahead of the host's",
    holder: { ...HOLDER, killed: 6, finished: 9 },
    driver: { ...DRIVER, killed: 14, finished: 15 },
    lines: [removed(9.4)],
  },
  {
    name: "the driver asked to stop, but no Killing Event from the kubelet",
    driver: { ...DRIVER, killed: null },
    lines: [removed(3.5)],
    problem: /driver pod driver-x7k2p has no Killing Event from the kubelet/,
  },
  {
    name: "the holder left with no terminated state (a simulator deleted it)",
    holder: { ...HOLDER, finished: undefined },
    lines: [removed(3.5)],
    problem: /claim holder holder has no terminated container state/,
  },
  {
    name: "the driver never asked to stop",
    driver: { ...DRIVER, requested: undefined },
    lines: [removed(3.5)],
    problem: /driver pod driver-x7k2p was never asked to stop/,
  },
  {
    name: "no driver pod on the node",
    driver: { ...DRIVER, app: "other" },
    lines: [removed(3.5)],
    problem: /no driver pod was recorded on machine-1/,
  },
];

/** The kubelet's Killing of each pod that has one. */
function killing(...pods: PodSpec[]): KillingTimes {
  const out = new Map<string, number>();
  for (const p of pods) {
    const k = p.killed === undefined ? p.requested : p.killed;
    if (k !== undefined && k !== null) out.set(`uid-${p.name}`, T0 / 1000 + k);
  }
  return out;
}

describe("draVerdict: claim holder, then unprepare, then driver", () => {
  for (const row of ROWS) {
    it(row.name, () => {
      const holder = row.holder ?? HOLDER;
      const driver = row.driver ?? DRIVER;
      const log = [...podLog(holder, 1), ...podLog(driver, 10)];
      const v = draVerdict(log, row.lines, ROLES, killing(holder, driver));
      if (row.problem === undefined) {
        expect(v.problems).toEqual([]);
        expect(v.order?.driverStopBegan).toBe(T0 / 1000 + (driver.killed ?? driver.requested!));
      } else {
        expect(v.problems.join("\n")).toMatch(row.problem);
      }
    });
  }

  it("reads the CRI line's time to the nanosecond field, not klog's yearless header", () => {
    expect(unpreparedAt([removed(3.25)], CLAIM)).toBeCloseTo(T0 / 1000 + 3.25, 3);
  });
});
