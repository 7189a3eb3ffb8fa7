// The agent's side of a refused status write (422 Invalid; src/api/status-refusal.ts says why
// it should not happen and what the writer does): the condition StatusWriteRefused, written
// alone on the Machine as the server has it, and an Event on the Machine. Both are best
// effort: the log line is the last resort, never the only word.
import type { ApiError } from "../api/errors.js";
import { refusalCondition, withRefusal } from "../api/status-refusal.js";
import { rfc3339 } from "../api/time.js";
import type { Machine } from "../api/types.js";
import { errorText } from "../errors.js";
import type { AgentApi } from "./api.js";

interface Log {
  error(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export async function reportRefused(
  api: AgentApi,
  machine: Machine,
  e: ApiError,
  retryMs: number,
  log: Log,
): Promise<void> {
  const name = machine.metadata.name;
  const cond = refusalCondition("Machine", name, e, retryMs);
  log.error({ code: e.code, retryMs, causes: e.causes }, cond.message);
  try {
    await api.machines.updateStatus(
      name,
      (cur) => ({
        ...cur,
        status: {
          ...cur.status,
          conditions: withRefusal(cur.status?.conditions, cond, rfc3339(new Date())),
        },
      }),
      machine,
    );
  } catch (err) {
    log.warn({ err: errorText(err) }, "StatusWriteRefused not written");
  }
  try {
    await api.machineEvent(machine, "Warning", "StatusWriteRefused", cond.message);
  } catch (err) {
    log.warn({ err: errorText(err) }, "StatusWriteRefused Event not recorded");
  }
}
