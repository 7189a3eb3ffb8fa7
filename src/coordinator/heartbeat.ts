// The agent's heartbeat while it is alive: renew its Lease every `intervalMs`. A failed renewal
// is logged and retried at the next tick; the agent keeps serving (the operator reads the
// silence as Lost after 40 s, which is the truth about a machine that cannot reach the API).
import type { HeartbeatClient } from "../api/heartbeat.js";

export interface HeartbeatLoop {
  stop(): void;
  /** Renewals that reached the API server, for status and tests. */
  readonly renewals: number;
}

export function startHeartbeat(
  client: HeartbeatClient,
  machine: string,
  cluster: string,
  intervalMs: number,
  onError: (e: unknown) => void,
): HeartbeatLoop {
  let renewals = 0;
  let busy = false;
  const beat = (): void => {
    if (busy) return; // a slow API server: never stack renewals
    busy = true;
    client
      .renew(machine, cluster)
      .then(() => (renewals += 1))
      .catch(onError)
      .finally(() => (busy = false));
  };
  beat();
  const timer = setInterval(beat, intervalMs);
  return {
    stop: () => clearInterval(timer),
    get renewals() {
      return renewals;
    },
  };
}
