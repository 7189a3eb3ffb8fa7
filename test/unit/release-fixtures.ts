// Clusters that follow a signed channel and machines that ask for a turn, for the tables that
// run the release decision through the operator's decide() (release-scenarios, hold-actions,
// revert-recalled-running).
import type {
  Cluster,
  ClusterCondition,
  ClusterStatus,
  Machine,
  ReleaseRef,
  TrustStatus,
} from "../../src/api/types.js";
import { decide, type Decision } from "../../src/operator/decide/decide.js";
import type { FloorRead } from "../../src/release-decision/decide.js";
import {
  D1,
  D2,
  D3,
  NOW,
  SETTINGS,
  V1,
  V2,
  V3,
  iso,
  machine,
  observed,
  cluster as pinnedCluster,
} from "./operator-fixtures.js";

export const ROOT = `sha256:${"f".repeat(64)}`;
export const R1 = { version: V1, digest: D1 };
export const R2 = { version: V2, digest: D2 };
export const R3 = { version: V3, digest: D3 };
/** The floors of R2 and R3 read: neither declares one. */
export const NO_FLOORS: ReadonlyMap<string, FloorRead> = new Map<string, FloorRead>([
  [D2, { kind: "read" }],
  [D3, { kind: "read" }],
]);

export const condition = (
  type: ClusterCondition["type"],
  status: "True" | "False",
  reason: string,
  message = "m",
): ClusterCondition =>
  ({ type, status, reason, message, lastTransitionTime: iso(NOW, -600) }) as ClusterCondition;

/** A Cluster following a signed channel, with this trust status and the rest of `status`. */
export function following(
  trust: Omit<TrustStatus, "mode" | "rootDigest">,
  status: ClusterStatus = {},
): Cluster {
  const c = pinnedCluster({ version: null, status });
  c.spec.releases = {
    source: "http://127.0.0.1:1/",
    trust: { mode: "channel", channel: "stable", rootDigest: ROOT, follow: {} },
  };
  c.status = {
    ...c.status,
    trust: {
      mode: "channel",
      rootDigest: ROOT,
      verifiedAt: iso(NOW, -60),
      expiresAt: iso(NOW, 86_400),
      ...trust,
    },
  };
  return c;
}

/** A machine on `on` whose other slot holds `to`, asking for a turn to it. */
export const asksFor = (name: string, on: ReleaseRef, to: ReleaseRef): Machine =>
  machine(name, {
    spec: { rebootPolicy: "Auto" },
    status: {
      ...on,
      step: "UpdatePending",
      staged: { ...to, slot: "a", at: iso(NOW, -120) },
      turnRequest: { ...to, at: iso(NOW, -120) },
    },
  });

/** The operator's decision on `c` and its machines at NOW, with these floors read. */
export const run = (
  c: Cluster,
  ms: Machine[],
  floors: ReadonlyMap<string, FloorRead> = NO_FLOORS,
): Decision => decide({ ...observed(c, ms), floors }, SETTINGS);
export const reverted = (d: Decision) => d.status.conditions?.find((c) => c.type === "Reverted");
export const granted = (d: Decision) => d.grants.map((g) => `${g.machine}->${g.version}`);
