// The slot marker: what a slot holds, as a closed state machine. The marker is the one thing
// that makes a slot bootable, so it is written last and synced (RAUC's "header last").
//
//   empty ──withdraw──> withdrawn ──begin──> writing ──staged──> staged
//     ^                     ^                   │                  │
//     └── (never written)   └────withdraw───────┴─────withdraw─────┘
//
// Invariant: only `staged` says a release is there, and only after every artifact verified.
// `writing` is a withdrawn slot that also names the release being written, for resuming.
export type MarkerState = "empty" | "withdrawn" | "writing" | "staged";

export interface Marker {
  state: MarkerState;
  /** writing and staged: the release and its catalog digest. */
  version?: string;
  releaseDigest?: string;
  /** staged: when every artifact last verified by reading the medium back. */
  verifiedAt?: string;
}

export type MarkerEvent =
  | { type: "withdraw" }
  | { type: "begin"; version: string; releaseDigest: string }
  | { type: "staged"; verifiedAt: string }
  | { type: "reverified"; verifiedAt: string };

export class MarkerTransitionError extends Error {}

/** The pure transition function; an impossible step is a bug and throws. */
export function nextMarker(m: Marker, e: MarkerEvent): Marker {
  switch (e.type) {
    case "withdraw":
      return { state: "withdrawn" };
    case "begin":
      if (m.state !== "withdrawn")
        throw new MarkerTransitionError(`begin from ${m.state}: withdraw first`);
      return { state: "writing", version: e.version, releaseDigest: e.releaseDigest };
    case "staged":
      if (m.state !== "writing")
        throw new MarkerTransitionError(`staged from ${m.state}: only a finished write stages`);
      return { ...m, state: "staged", verifiedAt: e.verifiedAt };
    case "reverified":
      if (m.state !== "staged") throw new MarkerTransitionError(`reverified from ${m.state}`);
      return { ...m, verifiedAt: e.verifiedAt };
    default: {
      const never: never = e;
      throw new MarkerTransitionError(`unknown event ${JSON.stringify(never)}`);
    }
  }
}

/** What the download must do first, given the target slot's marker and the wanted release. */
export type StagePlan = "done" | "resume" | "withdraw-and-write";

export function planStage(m: Marker, want: { version: string; releaseDigest: string }): StagePlan {
  const same = m.version === want.version && m.releaseDigest === want.releaseDigest;
  switch (m.state) {
    case "staged":
      return same ? "done" : "withdraw-and-write";
    case "writing":
      return same ? "resume" : "withdraw-and-write";
    case "empty":
    case "withdrawn":
      return "withdraw-and-write";
    default: {
      const never: never = m.state;
      throw new MarkerTransitionError(`unknown state ${String(never)}`);
    }
  }
}

const STATES: readonly MarkerState[] = ["empty", "withdrawn", "writing", "staged"];

/** Reads a stored marker; anything unreadable counts as withdrawn (never as staged). */
export function decodeMarker(text: string | undefined): Marker {
  if (text === undefined) return { state: "empty" };
  try {
    const v = JSON.parse(text) as Marker;
    if (!STATES.includes(v.state)) return { state: "withdrawn" };
    if ((v.state === "staged" || v.state === "writing") && (!v.version || !v.releaseDigest)) {
      return { state: "withdrawn" };
    }
    return v;
  } catch {
    return { state: "withdrawn" };
  }
}

export function encodeMarker(m: Marker): string {
  return `${JSON.stringify(m)}\n`;
}
