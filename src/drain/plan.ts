// The drain's decisions, as pure functions of what the API server shows:
//   planDrain: which pod on the node leaves in which wave, and which pods stay;
//   nextStep:  given the plan and a fresh look at pods and claims, which pods to evict now
//              and what the rest wait for.
//
// Waves leave strictly one after the other (a wave starts when every pod of the waves
// before it is gone, not merely terminating), in this order:
//   workloads, critical-workloads   non-critical pods before critical ones (Karpenter's
//                                   order), so nothing the other pods depend on leaves first;
//                                   the pods that hold DRA claims are among them;
//   drivers, critical-drivers       the pods that run DRA drivers, each only once no claim
//                                   its driver serves on this node lists a consumer in
//                                   status.reservedFor: the kubelet has had its
//                                   NodeUnprepareResources answered (kubernetes#129402);
//   driver-candidates               when a claim's driver cannot be identified, the pods
//                                   that could run it, once that driver's claims are free.
// Left on the node, as `kubectl drain --ignore-daemonsets` leaves them: mirror (static)
// pods, finished pods, DaemonSet pods that run no driver. A driver whose claim is held by
// a pod the drain leaves stays too, so that it is there for that pod's unprepare call. What
// liken relies on is the drain: the kubelet calls NodeUnprepareResources when a claim
// holder's pod stops, which the drain makes happen, before the driver goes. At the reboot
// itself the kubelet stops the pods left on the node (and calls unprepare) only with its
// graceful node shutdown on (kubelet shutdownGracePeriod, and systemd-logind to hold the
// shutdown); without it those pods die with the machine and their claims are unprepared by
// the kubelet of the next boot (docs/drain.md).
import type { V1Pod, ResourceV1ResourceClaim } from "@kubernetes/client-node";
import { claimsHeldBy, claimsOnNode, driversOf, localConsumers } from "./claims.js";
import { identifyDriver, mayRunAPlugin, type DriverPodSelectors } from "./drivers.js";
import {
  isCritical,
  isDaemonSetPod,
  isFinished,
  isMirrorPod,
  isTerminating,
  refOf,
  uidOf,
} from "./pods.js";

export type WaveName =
  "workloads" | "critical-workloads" | "drivers" | "critical-drivers" | "driver-candidates";

export const WAVE_ORDER: readonly WaveName[] = [
  "workloads",
  "critical-workloads",
  "drivers",
  "critical-drivers",
  "driver-candidates",
];

export type LeaveReason = "mirror-pod" | "finished" | "daemonset-pod" | "driver-of-left-pod";

export interface PlannedPod {
  uid: string;
  pod: string;
  wave: WaveName;
  /** The claims (namespace/name) this pod holds. */
  claims: string[];
  /** drivers / critical-drivers: the drivers it runs; driver-candidates: the unidentified ones. */
  drivers: string[];
}

export interface LeftPod {
  uid: string;
  pod: string;
  reason: LeaveReason;
  detail: string;
}

export interface DriverFinding {
  driver: string;
  by: "selector" | "plugin-dir" | "unidentified";
  pods: string[];
  claims: string[];
}

export interface DrainPlan {
  node: string;
  waves: { name: WaveName; pods: PlannedPod[] }[];
  left: LeftPod[];
  drivers: DriverFinding[];
  /** Every pod seen on the node when the plan was made: their reservations still count. */
  podUids: string[];
}

export interface Snapshot {
  pods: readonly V1Pod[];
  claims: readonly ResourceV1ResourceClaim[];
}

type Role =
  | { kind: "left"; reason: LeaveReason; detail: string }
  | { kind: "planned"; wave: WaveName; drivers: string[] };

export function planDrain(node: string, snap: Snapshot, selectors: DriverPodSelectors): DrainPlan {
  const podUids = new Set(snap.pods.map(uidOf));
  const nodeClaims = claimsOnNode(snap.claims, node, snap.pods, podUids);
  const findings = findDrivers(snap.pods, nodeClaims, selectors);
  const driversOfPod = new Map<string, string[]>();
  for (const f of findings) {
    for (const uid of f.podUids)
      driversOfPod.set(uid, [...(driversOfPod.get(uid) ?? []), f.driver]);
  }
  const unidentified = findings.filter((f) => f.by === "unidentified").map((f) => f.driver);

  const roles = new Map<string, Role>();
  for (const pod of snap.pods) {
    roles.set(uidOf(pod), roleOf(pod, nodeClaims, driversOfPod.get(uidOf(pod)), unidentified));
  }
  keepDriversOfLeftPods(snap.pods, roles, nodeClaims);

  const waves = WAVE_ORDER.map((name) => ({ name, pods: [] as PlannedPod[] }));
  const left: LeftPod[] = [];
  for (const pod of snap.pods) {
    const role = roles.get(uidOf(pod));
    if (role === undefined) continue;
    if (role.kind === "left") {
      left.push({ uid: uidOf(pod), pod: refOf(pod), reason: role.reason, detail: role.detail });
      continue;
    }
    const claims = claimsHeldBy(pod, nodeClaims).map(refOf);
    const entry = {
      uid: uidOf(pod),
      pod: refOf(pod),
      wave: role.wave,
      claims,
      drivers: role.drivers,
    };
    waves.find((w) => w.name === role.wave)?.pods.push(entry);
  }
  return {
    node,
    waves: waves.filter((w) => w.pods.length > 0),
    left,
    drivers: findings.map((f) => ({
      driver: f.driver,
      by: f.by,
      pods: snap.pods.filter((p) => f.podUids.includes(uidOf(p))).map(refOf),
      claims: nodeClaims.filter((c) => driversOf(c).includes(f.driver)).map(refOf),
    })),
    podUids: [...podUids],
  };
}

function findDrivers(
  pods: readonly V1Pod[],
  nodeClaims: readonly ResourceV1ResourceClaim[],
  selectors: DriverPodSelectors,
) {
  const fromClaims = new Set(nodeClaims.flatMap(driversOf));
  const names = [...new Set([...fromClaims, ...Object.keys(selectors)])].sort();
  return (
    names
      .map((d) => identifyDriver(d, pods, selectors))
      // A configured driver with no claim here and no pod here does not concern this node.
      .filter((f) => f.by !== "unidentified" || fromClaims.has(f.driver))
  );
}

function roleOf(
  pod: V1Pod,
  nodeClaims: readonly ResourceV1ResourceClaim[],
  drivers: string[] | undefined,
  unidentified: readonly string[],
): Role {
  if (isMirrorPod(pod)) return left("mirror-pod", "a static pod: its kubelet owns it");
  if (isFinished(pod)) return left("finished", `phase ${pod.status?.phase}: nothing runs in it`);
  const critical = isCritical(pod);
  if (drivers !== undefined) {
    return { kind: "planned", wave: critical ? "critical-drivers" : "drivers", drivers };
  }
  const holds = claimsHeldBy(pod, nodeClaims);
  if (unidentified.length > 0 && holds.length === 0 && mayRunAPlugin(pod)) {
    return { kind: "planned", wave: "driver-candidates", drivers: [...unidentified] };
  }
  if (isDaemonSetPod(pod)) {
    const why = holds.length > 0 ? `; it holds ${holds.map(refOf).join(", ")}` : "";
    return left("daemonset-pod", `a DaemonSet pod that runs no DRA driver${why}`);
  }
  return { kind: "planned", wave: critical ? "critical-workloads" : "workloads", drivers: [] };
}

function left(reason: LeaveReason, detail: string): Role {
  return { kind: "left", reason, detail };
}

/**
 * A driver (or candidate) pod stays when a claim it serves is held by a pod that stays:
 * evicting it would leave that pod's claim without the plugin that unprepares it.
 */
function keepDriversOfLeftPods(
  pods: readonly V1Pod[],
  roles: Map<string, Role>,
  nodeClaims: readonly ResourceV1ResourceClaim[],
): void {
  const heldByLeft = new Map<string, string>(); // driver -> "claim (held by pod)"
  for (const pod of pods) {
    if (roles.get(uidOf(pod))?.kind !== "left") continue;
    for (const claim of claimsHeldBy(pod, nodeClaims)) {
      for (const d of driversOf(claim))
        heldByLeft.set(d, `${refOf(claim)} (held by ${refOf(pod)})`);
    }
  }
  for (const pod of pods) {
    const role = roles.get(uidOf(pod));
    if (role?.kind !== "planned" || role.drivers.length === 0) continue;
    const d = role.drivers.find((x) => heldByLeft.has(x));
    if (d === undefined) continue;
    roles.set(
      uidOf(pod),
      left(
        "driver-of-left-pod",
        `runs driver ${d}, which serves ${heldByLeft.get(d)}, a pod the drain leaves`,
      ),
    );
  }
}

export type Wait =
  | { uid: string; pod: string; why: "terminating" }
  | {
      uid: string;
      pod: string;
      why: "claims-reserved";
      /** Each claim that still lists a consumer on this node, with those consumers. */
      claims: { claim: string; driver: string; consumers: string[] }[];
    };

export type Step =
  { kind: "done" } | { kind: "work"; wave: WaveName; evict: PlannedPod[]; waiting: Wait[] };

/** What to do now: evict `evict`, and tell people what `waiting` waits for. */
export function nextStep(plan: DrainPlan, snap: Snapshot): Step {
  const present = new Map(snap.pods.map((p) => [uidOf(p), p]));
  const seen = new Set([...plan.podUids, ...present.keys()]);
  const nodeClaims = claimsOnNode(snap.claims, plan.node, snap.pods, seen);
  for (const wave of plan.waves) {
    const remaining = wave.pods.filter((p) => present.has(p.uid));
    if (remaining.length === 0) continue;
    const evict: PlannedPod[] = [];
    const waiting: Wait[] = [];
    for (const planned of remaining) {
      const pod = present.get(planned.uid);
      if (pod !== undefined && isTerminating(pod)) {
        waiting.push({ uid: planned.uid, pod: planned.pod, why: "terminating" });
        continue;
      }
      const reserved = reservedClaims(planned.drivers, nodeClaims, plan.node, seen, present);
      if (reserved.length > 0) {
        waiting.push({
          uid: planned.uid,
          pod: planned.pod,
          why: "claims-reserved",
          claims: reserved,
        });
      } else {
        evict.push(planned);
      }
    }
    return { kind: "work", wave: wave.name, evict, waiting };
  }
  return { kind: "done" };
}

/** The claims served by any of `drivers` that still list a consumer on this node. */
function reservedClaims(
  drivers: readonly string[],
  nodeClaims: readonly ResourceV1ResourceClaim[],
  node: string,
  seen: ReadonlySet<string>,
  present: ReadonlyMap<string, V1Pod>,
): { claim: string; driver: string; consumers: string[] }[] {
  const out: { claim: string; driver: string; consumers: string[] }[] = [];
  for (const claim of nodeClaims) {
    const driver = driversOf(claim).find((d) => drivers.includes(d));
    if (driver === undefined) continue;
    const consumers = localConsumers(claim, node, seen);
    if (consumers.length === 0) continue;
    const ns = claim.metadata?.namespace ?? "";
    out.push({
      claim: refOf(claim),
      driver,
      consumers: consumers.map((c) => {
        const pod = present.get(c.uid);
        return pod !== undefined ? refOf(pod) : `${ns}/${c.name} (${c.resource}, uid ${c.uid})`;
      }),
    });
  }
  return out;
}

/**
 * Pods that reached the node after the plan was made join it: a scheduler that had not yet
 * seen the cordon, or a pod that tolerates it. They are planned like the first pods, except
 * DaemonSet pods: their controller puts them back on a cordoned node by design (they
 * tolerate node.kubernetes.io/unschedulable), so a replaced driver pod is not chased.
 */
export function admitNewcomers(
  plan: DrainPlan,
  snap: Snapshot,
  selectors: DriverPodSelectors,
): DrainPlan {
  const known = new Set(plan.podUids);
  const newcomers = snap.pods.filter((p) => !known.has(uidOf(p)));
  if (newcomers.length === 0) return plan;
  const joining = newcomers.filter((p) => !isDaemonSetPod(p));
  const sub = planDrain(plan.node, { pods: joining, claims: snap.claims }, selectors);
  const waves = WAVE_ORDER.map((name) => ({
    name,
    pods: [
      ...(plan.waves.find((w) => w.name === name)?.pods ?? []),
      ...(sub.waves.find((w) => w.name === name)?.pods ?? []),
    ],
  })).filter((w) => w.pods.length > 0);
  return {
    ...plan,
    waves,
    left: [...plan.left, ...sub.left],
    podUids: [...plan.podUids, ...newcomers.map(uidOf)],
  };
}
