// The agent's heartbeat while it runs: its Lease renewed every heartbeatMs
// (coordinator/heartbeat.ts); a renewal not made is logged, and the next one tried on time.
import type { Logger } from "pino";
import { startHeartbeat, type HeartbeatLoop } from "../coordinator/heartbeat.js";
import { errorCode, errorText } from "../errors.js";
import type { AgentApi } from "./api.js";
import type { AgentConfig } from "./config.js";
import type { SidePart } from "./side-part.js";
import type { ApiView } from "./view.js";

export class HeartbeatPart implements SidePart {
  private loop: HeartbeatLoop | undefined;

  constructor(
    private readonly cfg: Pick<AgentConfig, "machine" | "cluster" | "heartbeatMs">,
    private readonly api: AgentApi,
    private readonly view: ApiView,
    private readonly log: Logger,
  ) {}

  start(): void {
    const { api, view } = this;
    this.loop = startHeartbeat(
      {
        // Each outcome also tells the view whether the API server answers (view.ts).
        renew: async (m, c) => {
          try {
            await api.renew(m, c);
            view.heartbeat(undefined);
          } catch (e) {
            view.heartbeat(e);
            throw e;
          }
        },
      },
      this.cfg.machine,
      this.cfg.cluster,
      this.cfg.heartbeatMs,
      (e) => this.log.warn({ err: errorText(e), code: errorCode(e) }, "heartbeat not renewed"),
    );
  }

  /** Synchronous up to its end: the process may exit right after (act.ts, exit). */
  stop(): Promise<void> {
    this.loop?.stop();
    return Promise.resolve();
  }
}
