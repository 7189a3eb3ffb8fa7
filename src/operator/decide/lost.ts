// Lost and back: the marks the operator writes on Machines whose heartbeat it did not see for
// the Lost threshold, and the yield to a live agent (docs/operator.md, "HeartbeatUnseen").
import { type Machine, type MachineCondition } from "../../api/index.js";
import { stepAfterLost } from "../view/machine-view.js";

import { type Ctx, type LostMark } from "./decision.js";
// ---------------------------------------------------------------------------------------
// Lost marks on Machines.

export function markLost(ctx: Ctx): LostMark[] {
  const marks: LostMark[] = [];
  for (const m of ctx.o.machines) {
    const mark = lostMarkOf(ctx, m);
    if (mark !== undefined) marks.push(mark);
  }
  return marks;
}

export function lostMarkOf(ctx: Ctx, m: Machine): LostMark | undefined {
  const name = m.metadata.name;
  const lost = ctx.lost.has(name);
  const step = m.status?.step;
  const alive = m.status?.conditions?.find((c) => c.type === "Alive");
  const base = { machine: name, resourceVersion: m.metadata.resourceVersion, lost };
  if (lost && step !== "Lost") {
    if (alive?.status !== "False") {
      const was = step ?? "not yet reporting";
      const message = `no heartbeat (Lease ${name}) for ${ctx.s.lostAfterSeconds} s; it was ${was}`;
      return { ...base, reason: "NoHeartbeat", step: "Lost", message };
    }
    return yieldMark(ctx, m, alive, base);
  }
  if (!lost && (step === "Lost" || alive?.status === "False")) return backMark(m, base);
  return undefined;
}

/**
 * Silent, marked Lost before, and the agent wrote its step over the mark (it keeps Alive as
 * it is): it lives. Writing Lost again would meet another write back, and so on without end:
 * yield once (HeartbeatUnseen), and mark it Lost again only REPROBE_SECONDS later.
 */
export function yieldMark(
  ctx: Ctx,
  m: Machine,
  alive: MachineCondition,
  base: Pick<LostMark, "machine" | "resourceVersion" | "lost">,
): LostMark | undefined {
  const name = m.metadata.name;
  const step = m.status?.step;
  if (alive.reason !== "HeartbeatUnseen") {
    return { ...base, reason: "HeartbeatUnseen", message: unseenMessage(ctx, name, step) };
  }
  if (!reprobeDue(alive.lastTransitionTime, ctx.o.now)) return undefined;
  // In case the agent died since the yield: an idle agent writes nothing, so only its answer
  // to a mark tells.
  const message = `still no heartbeat (Lease ${name}) seen; marked Lost again to see whether its agent still answers (it was ${step ?? "not reporting"})`;
  return { ...base, reason: "NoHeartbeat", step: "Lost", message };
}

/**
 * How long the operator leaves a machine it yielded to (HeartbeatUnseen) before it marks it
 * Lost once more: a machine that died after the yield shows its agent's last step until then.
 * Ten minutes keeps STATUS at most that far behind, at one mark, one write back and one
 * HeartbeatUnseen per machine per ten minutes (the loop ran hundreds of writes a second).
 */
export const REPROBE_SECONDS = 10 * 60;

/** Measured from the yield's own record (the condition's lastTransitionTime, this side's clock). */
export function reprobeDue(yieldedAt: string, now: Date): boolean {
  const at = Date.parse(yieldedAt);
  return Number.isNaN(at) || now.getTime() - at >= REPROBE_SECONDS * 1000;
}

/** A renewal seen again: Alive=True, and the step it shows again if it reads Lost. */
export function backMark(
  m: Machine,
  base: Pick<LostMark, "machine" | "resourceVersion" | "lost">,
): LostMark {
  const step = m.status?.step;
  if (step !== "Lost") {
    const message = `its heartbeat returned; it shows ${step ?? "no step"} (its agent's)`;
    return { ...base, reason: "HeartbeatReturned", message };
  }
  const back = stepAfterLost(m);
  const message = `its heartbeat returned; it shows ${back} again`;
  return { ...base, reason: "HeartbeatReturned", step: back, message };
}

export function unseenMessage(ctx: Ctx, name: string, step: string | undefined): string {
  return (
    `its agent writes its status (step ${step ?? "none"}) but this operator has seen no renewal ` +
    `of its heartbeat Lease liken-heartbeats/${name} for ${ctx.s.lostAfterSeconds} s: it counts ` +
    `as Lost (against the budget, no turn) and keeps the agent's step; Lost is not written ` +
    `again until a renewal is seen. Check the agent's heartbeatSeconds (at most a quarter of ` +
    `${ctx.s.lostAfterSeconds} s), its log for "heartbeat not renewed" (a refused Lease write: ` +
    `RBAC, admission), and this operator's log for "watching heartbeat Leases failed"`
  );
}
