// The common steps of the agent harness's fleet tests: the start (the real operator runs, every
// machine is powered on, and each reports the fleet's first release before a test changes the
// target), a person's approval of a Manual machine's reboot, and the wait for a machine's node
// to serve again after its turn.
import type { ReleaseRef } from "../../src/api/types.js";
import { kubectl, waitFor } from "../support/kube.js";
import type { Fleet } from "./agent-harness.js";

/** Starts the real operator (with `operatorArgs`), powers every machine on and waits until
 * each runs the first release; `what` names that wait in a timeout's message. */
export async function runFirstRelease(
  fleet: Fleet,
  what: string,
  operatorArgs: string[] = [],
): Promise<void> {
  const first = fleet.releases[0];
  if (first === undefined) throw new Error("runFirstRelease: fleet.start() has made no release");
  await fleet.startRealOperator(operatorArgs);
  fleet.powerOnAll();
  await fleet.waitAll(what, (m) => m.status?.version === first.version);
}

/** Waits (30 s) until the Node `node` is schedulable again; "uncordoned" once it is. */
export function waitUncordoned(node: string): Promise<"uncordoned"> {
  return waitFor(
    "the node uncordoned",
    async () => {
      const r = await kubectl(["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"]);
      return r.stdout.trim() === "" ? ("uncordoned" as const) : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 300 },
  );
}

/** What `liken approve-reboot` writes: spec.approval of `machine` for exactly `release`, by `by`. */
export async function approveReboot(
  fleet: Fleet,
  machine: string,
  release: ReleaseRef,
  by: string,
): Promise<void> {
  const at = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  await fleet.api.machines.patch(machine, {
    spec: { approval: { version: release.version, digest: release.digest, by, at } },
  });
}
