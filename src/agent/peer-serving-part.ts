// What the agent serves: its peer server (peer-serving-run.ts), run at each status write as the
// Cluster and the verified slots say (peer-serving.ts), and where it serves written to Machine
// status.peers. Without a fresh Cluster it keeps what it serves; a server that cannot start
// (port taken) is logged and the machine serves nothing, which costs its peers a fallback to
// the channel, never a wrong byte. Stopped when the agent stops.
import type { Logger } from "pino";
import type { MachineStatus, SlotName } from "../api/types.js";
import { errorCode, errorText } from "../errors.js";
import type { SlotStore } from "../slots/store.js";
import type { AgentConfig } from "./config.js";
import type { AgentMeter } from "./meter.js";
import type { Observation } from "./observe.js";
import { planServing } from "./peer-serving.js";
import { PeerServingRun } from "./peer-serving-run.js";
import type { SidePart } from "./side-part.js";
import type { StatusExtras } from "./status.js";

export class PeerServingPart implements SidePart {
  private readonly peering: PeerServingRun;
  /** The slot this boot runs, as first observed: what the peer server may read as running. */
  private runningSlot: SlotName | undefined;

  constructor(
    private readonly cfg: Pick<AgentConfig, "nodeName" | "peersAddress">,
    store: SlotStore,
    meter: AgentMeter,
    private readonly log: Logger,
  ) {
    // The running slot is fixed for this agent's life (a reboot starts a new agent).
    this.peering = new PeerServingRun(
      // The peer server's module loads with the server (peer-serving-run.ts), not at start.
      (served) => async (digest, artifact) => {
        const { resolveFromStore } = await import("../slots/peer-serve.js");
        return resolveFromStore(store, this.runningSlot ?? "a", served)(digest, artifact);
      },
      cfg.nodeName,
      (n) => meter.peerServed(n),
    );
  }

  start(): void {}

  /** Runs the peer server as planned from `base`'s slots; where it serves (status.peers). */
  async status(seen: Observation, base: () => MachineStatus): Promise<Partial<StatusExtras>> {
    if (seen.cluster !== undefined) {
      this.runningSlot ??= seen.o.running.slot;
      const plan = planServing({
        cluster: seen.cluster,
        address: this.cfg.peersAddress,
        slots: base().slots ?? [],
      });
      try {
        await this.peering.apply(plan);
      } catch (e) {
        this.log.warn({ err: errorText(e), code: errorCode(e) }, "peer server not started");
        await this.peering.apply({ kind: "off", reason: "NothingToServe" });
      }
    }
    const peers = this.peering.status();
    return peers === undefined ? {} : { peers };
  }

  stop(): Promise<void> {
    return this.peering.stop();
  }
}
