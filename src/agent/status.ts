// The Machine status the agent reports, as a pure function of what it observed, what it
// decided and what it remembers. The daemon writes it only when it differs from the last
// write (ignoring lastHeartbeatTime: the live heartbeat is the Lease).
import {
  sameRelease,
  type Registration,
  type DownloadProgress,
  type DrainBlocker,
  type MachineCondition,
  type MachineStatus,
  type PeerServing,
  type PostPromotionHealth,
  type ReleaseRef,
  type SlotState,
  type SlotStatus,
} from "../api/types.js";
import { rfc3339 } from "../api/time.js";
import { boundStatus, MACHINE_STATUS_BOUNDS } from "../api/bounds.js";
import { turnRequestFor } from "../coordinator/turn.js";
import { inconclusiveMessage } from "./arming.js";
import type { Memory } from "./memory.js";
import {
  disrupted,
  runsTargetVersion,
  runsTargetWhy,
  type Decision,
  type Observed,
  type SlotView,
} from "./steps.js";

export interface StatusExtras {
  now: Date;
  progress?: DownloadProgress;
  drainBlocker?: DrainBlocker;
  /** The verdict of the gates run again after promotion (post-promotion.ts); kept until a new one. */
  postPromotionHealth?: PostPromotionHealth;
  /** The last failure on the way to the target (download, drain, slot check, reboot), with its code. */
  problem?: Problem;
  /** The client certificate: its notAfter and the IdentityCurrent condition (identity/). */
  identity?: { certificateExpiry: string; certificateKeyDigest?: string; condition: NewCondition };
  /** Where this machine serves its peers and what (peer-serving-run.ts); absent: nothing. */
  peers?: PeerServing;
  /** Where the role of the Machine this agent registered came from (registration.ts); kept after. */
  registration?: Registration;
}

/** A failure said for a person: a CamelCase reason, and a message that names the error's code. */
export interface Problem {
  reason: string;
  message: string;
}

/** The release a turn is asked for or held for: staged in the other slot, or on trial now. */
export function turnRelease(
  o: Pick<Observed, "boot" | "running" | "other">,
): ReleaseRef | undefined {
  if (o.boot.kind === "on-trial") return o.running.release;
  return o.other.state === "staged" ? o.other.release : undefined;
}

function slotState(v: SlotView, o: Observed, running: boolean): SlotState {
  if (running) return o.boot.kind === "on-trial" ? "Trial" : "Active";
  if (o.boot.kind === "armed" && o.boot.slot === v.slot) return "Trial";
  switch (v.state) {
    case "empty":
      return "Empty";
    case "writing":
      return "Writing";
    case "withdrawn":
      return "Withdrawn";
    case "staged":
      return sameRelease(v.release, o.target) && !sameRelease(v.release, o.running.release)
        ? "Staged"
        : "Inactive";
    default: {
      const never: never = v.state;
      throw new Error(`unknown slot state ${String(never)}`);
    }
  }
}

function slotStatus(v: SlotView, o: Observed, running: boolean): SlotStatus {
  return {
    name: v.slot,
    state: slotState(v, o, running),
    ...(v.release ? { version: v.release.version, digest: v.release.digest } : {}),
  };
}

function condition(
  prev: MachineCondition[] | undefined,
  c: Omit<MachineCondition, "lastTransitionTime">,
  now: string,
): MachineCondition {
  const old = prev?.find((p) => p.type === c.type);
  const at = old !== undefined && old.status === c.status ? old.lastTransitionTime : now;
  return { ...c, lastTransitionTime: at };
}

type NewCondition = Omit<MachineCondition, "lastTransitionTime">;

/**
 * UpToDate=False names the step, or the last failure on the way: a drain or reboot failure
 * happens with the release staged (ReleaseStaged=True), so this is where it shows.
 */
function upToDate(o: Observed, dec: Decision, x: StatusExtras): NewCondition {
  if (o.target === undefined || sameRelease(o.running.release, o.target)) {
    const message = "runs the Cluster's spec.version";
    return { type: "UpToDate", status: "True", reason: "RunsTarget", message };
  }
  if (runsTargetVersion(o.running.release, o.target)) {
    // The catalog entry of this version was replaced (removed, then added with another digest).
    const message = runsTargetWhy(o.running.release, o.target);
    return { type: "UpToDate", status: "True", reason: "RunsTargetVersionOtherDigest", message };
  }
  const running = o.running.release?.version ?? "an unknown release";
  const now = `runs ${running}, target ${o.target.version}: ${dec.why}`;
  if (x.problem === undefined) {
    return { type: "UpToDate", status: "False", reason: dec.step, message: now };
  }
  const message = `${now}; last failure: ${x.problem.message}`;
  return { type: "UpToDate", status: "False", reason: x.problem.reason, message };
}

function releaseStaged(o: Observed, x: StatusExtras): NewCondition {
  const other = o.other;
  if (other.state === "staged" && sameRelease(other.release, o.target)) {
    const message = `slot ${other.slot} holds ${other.release?.version}, every artifact verified`;
    return { type: "ReleaseStaged", status: "True", reason: "Verified", message };
  }
  const reason = x.problem?.reason ?? "NotStaged";
  const message = x.problem?.message ?? `slot ${other.slot} is ${other.state}`;
  return { type: "ReleaseStaged", status: "False", reason, message };
}

function conditions(
  prev: MachineStatus | undefined,
  o: Observed,
  dec: Decision,
  mem: Memory,
  x: StatusExtras,
  now: string,
): MachineCondition[] {
  const wanted: NewCondition[] = [upToDate(o, dec, x), releaseStaged(o, x)];
  const t = mem.lastTrial;
  if (t !== undefined) {
    // Inconclusive: the trial fell back without a verdict (give-up.ts), neither True nor False.
    const status =
      t.result === "Succeeded" ? "True" : t.result === "Inconclusive" ? "Unknown" : "False";
    const message = t.message ?? `${t.version} on slot ${t.slot}: ${t.result}`;
    wanted.push({ type: "TrialSucceeded", status, reason: t.reason, message });
  }
  const inconclusive = inconclusiveMessage(mem.noVerdict, o.target);
  if (inconclusive !== undefined && mem.noVerdict !== undefined) {
    const reason = mem.noVerdict.reason;
    wanted.push({ type: "TrialInconclusive", status: "True", reason, message: inconclusive });
  }
  if (x.identity !== undefined) wanted.push(x.identity.condition);
  if (x.drainBlocker !== undefined) {
    const message = x.drainBlocker.message;
    wanted.push({ type: "DrainBlocked", status: "True", reason: "EvictionRefused", message });
  }
  // cluster-operator's Alive stays as it wrote it: the operator reads an Alive=False under a
  // step that is not Lost as this agent answering its Lost mark, and stops writing Lost
  // (docs/operator.md, HeartbeatUnseen); an agent that dropped it would start the loop again.
  const kept = (prev?.conditions ?? []).filter((c) => OPERATOR_CONDITIONS.has(c.type));
  return [...wanted.map((c) => condition(prev?.conditions, c, now)), ...kept];
}

/** The conditions cluster-operator owns on a Machine. */
const OPERATOR_CONDITIONS: ReadonlySet<MachineCondition["type"]> = new Set(["Alive"]);

function optional<K extends keyof MachineStatus>(
  key: K,
  v: MachineStatus[K] | undefined,
): Partial<MachineStatus> {
  return v === undefined ? {} : ({ [key]: v } as Partial<MachineStatus>);
}

/** The client certificate's notAfter and key digest (identity/), when the agent knows them. */
function identityFields(i: StatusExtras["identity"]): Partial<MachineStatus> {
  if (i === undefined) return {};
  return {
    certificateExpiry: i.certificateExpiry,
    ...optional("certificateKeyDigest", i.certificateKeyDigest),
  };
}

/** Where the Machine's role came from: said once at registration, kept in every later status. */
function registrationOf(
  x: StatusExtras,
  prev: MachineStatus | undefined,
): Registration | undefined {
  return x.registration ?? prev?.registration;
}

export function machineStatus(
  prev: MachineStatus | undefined,
  o: Observed,
  dec: Decision,
  mem: Memory,
  x: StatusExtras,
): MachineStatus {
  const now = rfc3339(x.now);
  const running = o.running.release;
  const turnRequest = turnRequestFor(dec.wantsTurn, turnRelease(o), prev?.turnRequest, x.now);
  const other = o.other;
  // Staged means "for the next trial": a release the target moved away from is no longer that
  // (the slot reads Inactive, and STAGED must not keep showing it: issue 42).
  const staged =
    other.state === "staged" &&
    other.release &&
    !sameRelease(other.release, running) &&
    sameRelease(other.release, o.target)
      ? {
          ...other.release,
          slot: other.slot,
          at: prev?.staged?.digest === other.release.digest ? prev.staged.at : now,
        }
      : undefined;
  // Within the CRD's bounds (bounds.ts), whatever was made or remembered: one field too long
  // (a trial message persisted before its bound) would have the server refuse every write.
  return boundStatus(MACHINE_STATUS_BOUNDS, {
    ...(running ? { version: running.version, digest: running.digest } : {}),
    step: dec.step,
    ...optional("updateStage", dec.stage),
    ...optional("target", o.target),
    bootedSlot: o.running.slot,
    bootId: o.bootId,
    slots: [o.running, o.other]
      .map((v) => slotStatus(v, o, v === o.running))
      // By code point, not localeCompare: the names are "a" and "b", and a collator would
      // load ICU's collation data into every agent for good (about 2.7 MiB of RSS).
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    ...optional("staged", staged),
    ...optional("progress", dec.step === "Downloading" ? x.progress : undefined),
    ...optional("turnRequest", turnRequest),
    ...optional("turnTakenBack", turnTakenBackSeen(prev, o, dec)),
    ...optional("lastTrial", mem.lastTrial),
    ...optional("failedReleases", mem.failed.length > 0 ? mem.failed : undefined),
    ...optional("postPromotionHealth", x.postPromotionHealth ?? prev?.postPromotionHealth),
    ...optional("drainBlocker", x.drainBlocker),
    ...optional("drainTimedOut", mem.drainTimedOut),
    ...optional("blockingPods", blockingPodsOf(o, dec)),
    ...optional("peers", x.peers),
    ...identityFields(x.identity),
    ...optional("registration", registrationOf(x, prev)),
    conditions: conditions(prev, o, dec, mem, x, now),
  } satisfies MachineStatus).status;
}

/**
 * The machine's word that it saw its turn taken back and did not act on it (taken-back.ts on
 * the operator's side): only while it holds no turn and nothing it began is left (no drain
 * begun, or its node given back), and its step is not Updating. Otherwise the last word stays.
 */
export function turnTakenBackSeen(
  prev: MachineStatus | undefined,
  o: Pick<Observed, "turnTakenBack" | "turn" | "drainedDigest" | "drainBegunDigest">,
  dec: Pick<Decision, "step" | "stage">,
): MachineStatus["turnTakenBack"] {
  const quiet = !o.turn && !disrupted(o) && dec.step !== "Updating" && dec.stage === undefined;
  if (o.turnTakenBack !== undefined && quiet) {
    return prev?.turnTakenBack?.grantedAt === o.turnTakenBack
      ? prev.turnTakenBack
      : { grantedAt: o.turnTakenBack };
  }
  return prev?.turnTakenBack;
}

/** Whether two statuses say the same (lastHeartbeatTime and observedGeneration aside). */
export function sameStatus(a: MachineStatus | undefined, b: MachineStatus): boolean {
  return statusKey(a) === statusKey(b);
}

/** What a status says, as one string (lastHeartbeatTime and observedGeneration aside). */
export function statusKey(s: MachineStatus | undefined): string {
  if (s === undefined) return "";
  const { lastHeartbeatTime: _h, observedGeneration: _g, ...rest } = s;
  return canonical(rest);
}

/** JSON with object keys sorted at every level (the server may reorder them). */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

/** The blocking pods the status names: while they hold the turn of a machine waiting to ask. */
function blockingPodsOf(o: Observed, dec: Decision): string[] | undefined {
  return dec.step === "UpdatePending" ? o.blocking?.pods : undefined;
}
