// The integration tests' watcher must be able to catch a bad drain: each check below is fed
// a log that breaks it.
import { describe, expect, it } from "vitest";
import type { V1Pod } from "@kubernetes/client-node";
import { violations, type Recorded } from "../../test/support/drain-invariants.js";
import { claim, GPU, pod } from "./drain-fixtures.js";

const ready = (p: V1Pod): V1Pod => ({
  ...p,
  status: { ...p.status, conditions: [{ type: "Ready", status: "True" }] },
});
const leaving = (p: V1Pod): V1Pod => ({
  ...p,
  metadata: { ...p.metadata, deletionTimestamp: new Date() },
});

const driver = ready(pod({ name: "driver", daemonSet: true }));
const holder = ready(pod({ name: "holder", labels: { app: "train" }, claims: ["c1"] }));
const other = ready(pod({ name: "other", labels: { app: "train" } }));
const reserved = claim({ name: "c1", driver: GPU, reservedFor: ["holder"] });
const released = claim({ name: "c1", driver: GPU, reservedFor: [] });

const P = (type: Recorded["type"], rv: number, obj: V1Pod): Recorded => ({
  type,
  kind: "Pod",
  rv,
  obj,
});
const C = (type: Recorded["type"], rv: number, obj: typeof reserved): Recorded => ({
  type,
  kind: "ResourceClaim",
  rv,
  obj,
});

const start = [
  P("ADDED", 1, driver),
  P("ADDED", 2, holder),
  P("ADDED", 3, other),
  C("ADDED", 4, reserved),
];
const exp = {
  node: "node-a",
  drivers: [{ uid: "uid-driver", driver: GPU }],
  budgets: [{ name: "train", labels: { app: "train" }, minHealthy: 1 }],
};

describe("drain invariants on a recorded log", () => {
  it("a drain in the right order breaks none (events arrive out of order: sorted by rv)", () => {
    const log = [
      P("DELETED", 9, leaving(driver)),
      ...start,
      P("MODIFIED", 5, leaving(holder)),
      P("DELETED", 6, leaving(holder)),
      C("MODIFIED", 7, released),
      P("MODIFIED", 8, leaving(driver)),
    ];
    expect(violations(log, exp)).toEqual([]);
  });

  it("catches a driver that leaves before its claim holder is gone", () => {
    const log = [...start, P("MODIFIED", 5, leaving(holder)), P("MODIFIED", 6, leaving(driver))];
    expect(violations(log, exp)).toEqual([
      "driver pod driver left while claim holder uid-holder was still on the API server",
      "driver pod driver left while claim c1 was reserved for holder",
    ]);
  });

  it("catches a driver that leaves while the claim still lists its gone holder", () => {
    const log = [
      ...start,
      P("MODIFIED", 5, leaving(holder)),
      P("DELETED", 6, leaving(holder)),
      P("MODIFIED", 7, leaving(driver)),
      C("MODIFIED", 8, released),
    ];
    expect(violations(log, exp)).toEqual([
      "driver pod driver left while claim c1 was reserved for holder",
    ]);
  });

  it("catches a budget that falls below its minimum", () => {
    const log = [...start, P("MODIFIED", 5, leaving(holder)), P("MODIFIED", 6, leaving(other))];
    expect(violations(log, { ...exp, drivers: [] })).toEqual([
      "budget train: 0 healthy pods after other left, minimum 1",
    ]);
  });
});
