// What the agent's step decision reads and says: Observed (everything decide() looks at,
// gathered by the daemon at one moment), the Action it picks and the Decision it returns, and
// the one constructor of a Decision. Apart from the rules (steps.ts and the modules it
// dispatches to) so each of those imports the shapes without importing decide().
import type { Blocking } from "./blocking-pods.js";
import type { BootVerdict, Slot } from "../bootloader/types.js";
import type { NoVerdictSeen } from "./arming.js";
import type { GiveUpReason } from "./give-up.js";
import type { HealthSeen } from "./health.js";
import type { Phase } from "./phases.js";
import type { NodeSeen } from "./rejoin.js";
import type { Approval, AgentStep, ReleaseRef, RebootPolicy, UpdateStage } from "../api/types.js";

/** A slot as the slot store's marker describes it. */
export interface SlotView {
  slot: Slot;
  state: "empty" | "withdrawn" | "writing" | "staged";
  release?: ReleaseRef;
}

/** Everything decide() looks at, gathered by the daemon at one moment. */
export interface Observed {
  /** Milliseconds since boot (clock.ts): every time below is on this clock, never the wall's. */
  now: number;
  /** False when the last read of the Cluster/Machine failed. */
  apiReachable: boolean;
  /** The bootloader's verdict combined with the running slot. */
  boot: BootVerdict;
  /** The slot running now and what it holds. */
  running: SlotView;
  /** The slot not running (where downloads go). */
  other: SlotView;
  /** The Cluster's spec.version with its catalog digest; undefined when there is none. */
  target: ReleaseRef | undefined;
  policy: RebootPolicy;
  /** machine.spec.approval: decide() applies it to the release staged in `other`. */
  approval: Pick<Approval, "version" | "digest"> | undefined;
  /** status.rebootTurns holds a record for this machine and the release staged in `other`. */
  turn: boolean;
  /** A download in progress (it runs beside the loop) and what it writes. */
  download: ReleaseRef | undefined;
  /** Since when the running download wrote no new byte (undefined: none running). */
  downloadIdleSince: number | undefined;
  /** The last download failure of the target and when. */
  downloadFailedAt: number | undefined;
  /** Digests this machine must not try again (failed trial or slot check). */
  failedDigests: readonly string[];
  /** The drain finished for this staged digest during the current turn. */
  drainedDigest: string | undefined;
  /**
   * A drain began for this digest (recorded before the first cordon) and the turn has not been
   * given back since: the node may be cordoned and partly drained even if the drain never
   * finished (the agent killed, the turn taken back mid-drain). Absent: nothing begun.
   */
  drainBegunDigest?: string;
  /**
   * The grantedAt of a turn taken back from this machine (Cluster status.takenBackTurns), which
   * the operator counts as down until this machine's status says it did not act on it.
   */
  turnTakenBack?: string;
  /**
   * Why the cluster paused the held turn before its drain (Cluster status.rebootTurns[].
   * drainPause: the budget filled since the grant). A machine that has not begun its drain waits.
   */
  turnPaused?: string;
  /**
   * A person holds this machine at its release (Machine spec.hold, `liken machine hold`): the
   * text the status shows (who, since when, why). Absent: not held.
   */
  held?: string;
  /** Pods of the Cluster's spec.disruption.blockingPods on this node (blocking-pods.ts). */
  blocking?: Blocking;
  /**
   * The staged release's boot files are still to be installed (systemd-boot: its kernel and
   * initrd on the ESP; memory's bootFiles names another release or slot). Absent: none due.
   */
  bootFilesDue?: boolean;
  /** The Node's name (the agent's config). */
  nodeName: string;
  /** The Node as read (rejoin.ts); undefined: not read (see nodeUnread) or no such Node. */
  node: NodeSeen | undefined;
  /** Why the Node could not be read: then there is no look, and no verdict. */
  nodeUnread: string | undefined;
  /** When this boot started on the wall clock (ms): a Ready heartbeat must be later. */
  bootStartedAt: number;
  /** On a trial boot: the bootIDs its Node showed so far (memory), to name them on giving up. */
  nodeBootIds?: readonly string[];
  /** When this boot was first seen as a trial boot (for the prove timeout). */
  trialSeenAt: number | undefined;
  /** On a trial boot: the health gates and their last check (health.ts); absent: none. */
  health?: HealthSeen;
  /** This boot's identity (the kernel's boot_id): a new boot, or the agent restarted in this one. */
  bootId: string;
  /**
   * The trial the agent armed and has not seen through (memory), and the boot it was armed in
   * (undefined: armed by an agent that did not record it, so never judged not taken); `shown`:
   * the bootloader read back armed for it (false: only the intent was recorded).
   */
  armedTrial: { slot: Slot; bootId: string | undefined; shown: boolean } | undefined;
  /** The last trial that ended without a verdict (memory's noVerdict), for the arming bound. */
  noVerdict?: NoVerdictSeen;
}

export type Action =
  | { kind: "wait" }
  | { kind: "withdraw"; slot: Slot }
  /** Stop the download child; `failed`: count it as a failed attempt (retry after a delay). */
  | { kind: "cancel-download"; failed: boolean }
  | { kind: "download"; slot: Slot; release: ReleaseRef }
  | { kind: "request-turn"; release: ReleaseRef }
  /** The staged release's boot files to where the bootloader loads them (before any turn). */
  | { kind: "install-boot-files"; slot: Slot; release: ReleaseRef }
  | { kind: "drain"; release: ReleaseRef }
  | { kind: "check-and-reboot"; slot: Slot; release: ReleaseRef }
  /** `failure`: on a trial boot, the reason the report after the fallback gives (give-up.ts). */
  | { kind: "reboot"; reason: string; failure?: GiveUpReason }
  /** Run the health gates of the trial boot (health-run.ts); the next look sees the result. */
  | { kind: "check-health" }
  | { kind: "disarm"; reason: string }
  | { kind: "promote"; slot: Slot }
  | { kind: "fall-back-report"; slot: Slot }
  /** The bootloader did not take the trial of `slot`: remember, disarm, report (no reboot). */
  | { kind: "not-taken-report"; slot: Slot }
  /** The trial of `slot` was never shown armed: count it (not a failure), disarm, no reboot. */
  | { kind: "not-armed-report"; slot: Slot }
  /** Give the turn back and undo liken's cordon (the machine serves again without a reboot). */
  | { kind: "release-turn"; reason: string };

export interface Decision {
  phase: Phase;
  action: Action;
  /** The STATUS word (section 4 of the page). */
  step: AgentStep;
  stage?: UpdateStage;
  /** Whether status.turnRequest names the staged release (asked for or held). */
  wantsTurn: boolean;
  /** Why, for logs and the status message. */
  why: string;
}

/** Nothing to do at this look. */
export const WAIT: Action = { kind: "wait" };

/** A Decision; by default not asking for a turn and without a stage. */
export function d(
  phase: Phase,
  step: AgentStep,
  action: Action,
  why: string,
  extra: { stage?: UpdateStage; wantsTurn?: boolean } = {},
): Decision {
  return {
    phase,
    step,
    action,
    why,
    wantsTurn: extra.wantsTurn ?? false,
    ...(extra.stage ? { stage: extra.stage } : {}),
  };
}
