// Whether the machine scenario's trial was promoted only after its Node showed the trial boot:
// a bootID the Node had not shown before, with Ready True, whose first heartbeat is no later
// than the promotion's record (lastTrial.at). Pure, on what the host saw (node-watch.ts), so a
// unit test shows each way it fails.
import type { NodeSight } from "./node-watch.js";

/**
 * lastHeartbeatTime and lastTrial.at are whole seconds (RFC 3339, truncated): a heartbeat in the
 * same second as the promotion may read one second later.
 */
const SECOND_MS = 1_000;

export type RejoinProof = { ok: true; says: string } | { ok: false; problem: string };

export function rejoinProof(sights: readonly NodeSight[], promotedAt?: string): RejoinProof {
  const ids = [...new Set(sights.map((s) => s.bootId).filter(Boolean))];
  const now = sights.at(-1)?.bootId ?? "";
  const first = sights.find((s) => s.bootId === now && s.ready === "True");
  const at = promotedAt === undefined ? undefined : new Date(promotedAt).getTime();
  if (ids.length < 2 || ids[0] === now) {
    return {
      ok: false,
      problem: `the Node showed bootIDs [${ids.join(", ")}]: the trial boot's is not new`,
    };
  }
  if (first?.heartbeatAt === undefined || at === undefined) {
    return { ok: false, problem: `no Ready heartbeat of boot ${now} seen, or no lastTrial.at` };
  }
  const ready = new Date(first.heartbeatAt).toISOString();
  if (first.heartbeatAt > at + SECOND_MS) {
    return {
      ok: false,
      problem: `promoted at ${promotedAt}, before the Node's first Ready of the trial boot ${now} (${ready})`,
    };
  }
  return {
    ok: true,
    says: `the Node showed the trial boot ${now} Ready at ${ready}, promoted at ${promotedAt} (earlier boot ${ids[0]})`,
  };
}
