// A seam for tests, off unless LIKEN_TEST_HOLD_TURN_WRITE=1: the first status write that
// grants a turn or starts a revert waits, after its decision and before it is sent, until the process gets
// SIGUSR2. That is a copy paused between its read and its write, the case the Cluster's
// resourceVersion guards (test/integration/operator-stale.test.ts). A SIGSTOP cannot be
// timed into that gap from outside; this hold can, and the rest of the process keeps running
// (watches, the pause detector), as it would while one request is slow.
import type { RebootTurn } from "../../api/index.js";
import type { Logger } from "../logger.js";

export const HOLD_ENV = "LIKEN_TEST_HOLD_TURN_WRITE";

/** Runs after a decision that grants `grants` and before its write is sent. */
export type BeforeTurnWrite = (cluster: string, grants: readonly RebootTurn[]) => Promise<void>;

export function holdFirstTurnWrite(
  env: NodeJS.ProcessEnv,
  log: Logger,
): BeforeTurnWrite | undefined {
  if (env[HOLD_ENV] !== "1") return undefined;
  let held = false;
  return async (cluster, grants) => {
    if (held) return;
    held = true;
    const released = new Promise<void>((resolve) => process.once("SIGUSR2", () => resolve()));
    log.warn(
      { cluster, machines: grants.map((g) => g.machine), pid: process.pid },
      `${HOLD_ENV}: holding this turn write until SIGUSR2`,
    );
    await released;
    log.warn({ cluster }, `${HOLD_ENV}: released; sending the write decided before the hold`);
  };
}
