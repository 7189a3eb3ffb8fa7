// The agent's heartbeat while it is alive: renew its Lease every `intervalMs`. A failed renewal
// is logged and retried at the next tick; the agent keeps serving (the operator reads the
// silence as Lost after 40 s, which is the truth about a machine that cannot reach the API).

/** Whatever renews the Lease (api/heartbeat.ts over client-node, agent/api.ts over https). */
export interface Renewer {
  renew(machine: string, cluster: string): Promise<unknown>;
}

export interface HeartbeatLoop {
  stop(): void;
  /** Renewals that reached the API server, for status and tests. */
  readonly renewals: number;
}

export function startHeartbeat(
  client: Renewer,
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
