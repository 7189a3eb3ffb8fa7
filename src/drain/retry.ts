// How long the drain waits between looks and between eviction attempts.

/**
 * Between two looks at the node's pods and claims. kubectl drain polls for deleted pods
 * every second (k8s.io/kubectl/pkg/drain: waitForDelete, wait.PollImmediate(1s)).
 */
export const POLL_INTERVAL_MS = 1_000;

/**
 * An eviction refused with 429 (a PodDisruptionBudget allows no disruption now) is tried
 * again after a delay that starts here and doubles per refusal...
 */
export const EVICTION_RETRY_INITIAL_MS = 1_000;

/**
 * ...up to the fixed 5 s kubectl drain waits after every 429 ("will retry after 5s",
 * k8s.io/kubectl/pkg/drain/drain.go). The disruption controller usually frees a budget
 * within seconds of a replacement pod turning Ready, so waiting longer only slows the drain.
 */
export const EVICTION_RETRY_MAX_MS = 5_000;

/**
 * Each delay is spread by up to ±20 % so that the agents of many machines, refused by the
 * same budget, do not come back in lockstep (client-go's wait.Jitter uses the same idea).
 */
export const EVICTION_RETRY_JITTER = 0.2;

/** The delay before eviction attempt `attempt + 1` after `attempt` refusals (attempt >= 1). */
export function evictionRetryDelay(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(
    EVICTION_RETRY_MAX_MS,
    EVICTION_RETRY_INITIAL_MS * 2 ** Math.max(0, attempt - 1),
  );
  const spread = base * EVICTION_RETRY_JITTER * (2 * random() - 1);
  return Math.round(base + spread);
}
