// What the agent tells its metrics, as an interface with a silent default: the Prometheus
// registry (metrics.ts, which loads prom-client) is loaded only when the config or
// --metrics-address asks for metrics, so an agent without them never pays for the library.
import type { TrialRecord } from "../api/types.js";
import type { PeerDrop } from "../slots/peer-sources.js";

export interface AgentMeter {
  /** A download's durable byte count moved from `before` to `now` (never counts backwards). */
  downloaded(before: number, now: number): void;
  /** An adaptive download copied `n` more bytes from the machine's own slots. */
  reused(n: number): void;
  /** A download received `n` more bytes from the channel. */
  fetched(n: number): void;
  /** A step (download, drain, arm trial, promote, ...) took `ms` and ended ok or failed. */
  step(step: string, ms: number, ok: boolean): void;
  /** A download dropped a peer (and refused its chunk, when it failed on one). */
  peerDropped(d: PeerDrop): void;
  /** This machine's peer server sent `n` more body bytes (chunks or indexes) to its peers. */
  peerServed(n: number): void;
  /** Where the last trial's record lives (the agent's memory file, as loaded). */
  trialFrom(read: () => TrialRecord | undefined): void;
}

export const NO_METER: AgentMeter = {
  downloaded: () => undefined,
  reused: () => undefined,
  fetched: () => undefined,
  step: () => undefined,
  peerDropped: () => undefined,
  peerServed: () => undefined,
  trialFrom: () => undefined,
};
