// What the agent reports: the Machine status the tick's decision makes (status.ts), written
// conditioned on the resourceVersion the watch has, held back by a backoff after a refusal
// (422) and the refusal said as a condition and an Event (status-refused.ts). Its one answer,
// whether the stored status now says it, is what a drain waits for (daemon.ts, ANNOUNCED).
import type { Logger } from "pino";
import { isInvalid, isNotFound } from "../api/errors.js";
import { RefusalBackoff } from "../api/status-refusal.js";
import { rfc3339 } from "../api/time.js";
import type { Machine, MachineStatus } from "../api/types.js";
import { errorCode, errorText } from "../errors.js";
import type { AgentApi } from "./api.js";
import type { MemoryKeeper } from "./memory.js";
import type { Observation } from "./observe.js";
import { machineStatus, sameStatus, type StatusExtras } from "./status.js";
import { reportRefused } from "./status-refused.js";
import type { Decision } from "./steps.js";
import type { ApiView } from "./view.js";

export interface StatusWriteParts {
  api: AgentApi;
  view: ApiView;
  memory: MemoryKeeper;
  log: Logger;
  /** The Machine's name. */
  machine: string;
  /** What the status says beside the decision; `statusOf` makes the status from such extras. */
  extras: (
    seen: Observation,
    statusOf: (x: StatusExtras) => MachineStatus,
  ) => Promise<StatusExtras>;
}

/** Writes the status `dec` makes; true when the stored status says it (written or the same). */
export type Report = (seen: Observation, dec: Decision) => Promise<boolean>;

/** The one object whose refusals the agent tracks: its Machine's status. */
const REFUSAL_KEY = "status";

/** The status write, its refusal backoff held for the life of the agent. */
export function statusReport(p: StatusWriteParts): Report {
  const w = new StatusWrite(p);
  return (seen, dec) => w.write(seen, dec);
}

class StatusWrite {
  /** Whether the last status write was refused (422): then every status waits (backoff). */
  private readonly refusals = new RefusalBackoff();

  constructor(private readonly p: StatusWriteParts) {}

  async write(seen: Observation, dec: Decision): Promise<boolean> {
    const { o, machine } = seen;
    if (!o.apiReachable || machine === undefined) return false;
    const mem = this.p.memory.now;
    const extras = await this.p.extras(seen, (x) => machineStatus(machine.status, o, dec, mem, x));
    const next = machineStatus(machine.status, o, dec, mem, extras);
    if (sameStatus(machine.status, next)) return true;
    // After a refusal (422) every status waits for the backoff, not only the same one: what
    // the server refused (a field the installed CRD does not take) is in the next one too, and
    // a download's progress would otherwise make a new status, and a new refusal, every tick.
    if (this.refusals.holds(REFUSAL_KEY, REFUSAL_KEY, Date.now())) return false;
    const status = (cur: MachineStatus | undefined): MachineStatus =>
      machineStatus(cur, o, dec, mem, extras);
    return this.send(machine, status);
  }

  private async send(
    machine: Machine,
    status: (cur: MachineStatus | undefined) => MachineStatus,
  ): Promise<boolean> {
    const { api, view, log } = this.p;
    const began = Date.now();
    try {
      // Conditioned on the resourceVersion of the Machine as the watch (or this agent's last
      // write) has it, with no read first; a conflict is retried with a fresh read.
      const written = await api.machines.updateStatus(
        this.p.machine,
        (cur) => ({
          ...cur,
          status: { ...status(cur.status), lastHeartbeatTime: rfc3339(new Date()) },
        }),
        machine,
      );
      this.refusals.clear(REFUSAL_KEY);
      if (written) {
        view.wrote(written);
        const ms = Date.now() - began;
        log.debug({ step: written.status?.step, ms }, "status written");
      }
      return true;
    } catch (e) {
      if (isNotFound(e)) {
        // Deleted while this agent runs: it registers the Machine again (observe.ts) once the
        // watch sees it gone, instead of writing to a Machine that is not there every tick.
        view.forgetWritten();
        log.warn({ machine: this.p.machine }, "the Machine is gone; registering it again");
        return false;
      }
      if (isInvalid(e)) {
        const delay = this.refusals.refused(REFUSAL_KEY, REFUSAL_KEY, Date.now());
        await reportRefused(api, machine, e, delay, log);
        return false;
      }
      log.warn({ err: errorText(e), code: errorCode(e) }, "status not written");
      return false;
    }
  }
}
