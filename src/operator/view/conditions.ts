// metav1.Condition bookkeeping, pure. lastTransitionTime moves when the status OR the reason
// changes (Kubernetes moves it on status only): a person reading "RolloutStalled since 10:42"
// needs the time the stall began, even though Progressing was already False for another
// reason. The StartupGrace condition uses it to carry the copy's start time (see decide.ts).
import type { Condition, Time } from "../../api/index.js";

export function findCondition<C extends Condition>(
  list: readonly C[] | undefined,
  type: C["type"],
): C | undefined {
  return list?.find((c) => c.type === type);
}

/** `next` with its lastTransitionTime: the old one while status and reason stay, else `now`. */
export function stamped<C extends Condition>(
  list: readonly Condition[] | undefined,
  next: Omit<C, "lastTransitionTime">,
  now: Time,
): C {
  const old = list?.find((c) => c.type === next.type);
  const same = old !== undefined && old.status === next.status && old.reason === next.reason;
  return { ...next, lastTransitionTime: same ? old.lastTransitionTime : now } as C;
}

/** The list with `next` in place of the condition of the same type (order kept). */
export function setCondition<C extends Condition>(
  list: readonly C[] | undefined,
  next: Omit<C, "lastTransitionTime"> & { lastTransitionTime?: Time },
  now: Time,
): C[] {
  const old = findCondition(list, next.type);
  const cond =
    next.lastTransitionTime === undefined ? stamped<C>(list, next, now) : ({ ...next } as C);
  if (old === undefined) return [...(list ?? []), cond];
  return (list ?? []).map((c) => (c.type === next.type ? cond : c));
}
