// The held drain of the drain tests (agent-drain-watch, operator-drain-stall,
// operator-drain-timeout): a fleet whose worker has one pod on its node that a
// PodDisruptionBudget never lets go, so that the worker's drain on its next turn is held.
import { afterAll, beforeAll } from "vitest";
import type { Cluster } from "../../src/api/types.js";
import { podHeldOnNode } from "../support/drain-helpers.js";
import { createNamespace, kubectl } from "../support/kube.js";
import { Fleet, type FleetMachine } from "./agent-harness.js";
import { runFirstRelease } from "./fleet-steps.js";

export interface HeldDrain {
  fleet: Fleet;
  /** The held pod's namespace (made before the tests): its pod and budget are both `db`. */
  ns: () => string;
}

/**
 * In a describe: a fleet on `versions` (its Cluster's spec with `spec`), the Auto worker `held`
 * (with the agent's drain deadline `drainMs` if given) and then the `others`; a namespace
 * `namespace`-... with the pod `db` on held's node that its PodDisruptionBudget `db` never lets
 * be evicted; the real operator (with `operatorArgs`) started and every machine on the first
 * release (the wait named `runs`), all before the tests. After them the fleet stops and the
 * namespace goes.
 */
export function heldDrain(o: {
  versions: string[];
  spec?: Partial<Cluster["spec"]>;
  held: string;
  drainMs?: number;
  others?: FleetMachine[];
  namespace: string;
  runs: string;
  operatorArgs?: string[];
}): HeldDrain {
  const fleet = new Fleet();
  let ns = "";
  beforeAll(async () => {
    await fleet.start(o.versions, o.spec);
    await fleet.addMachine(
      { name: o.held, role: "Worker", rebootPolicy: "Auto" },
      o.drainMs === undefined ? {} : { drainMs: o.drainMs },
    );
    for (const m of o.others ?? []) await fleet.addMachine(m);
    ns = await createNamespace(o.namespace);
    await podHeldOnNode(ns, "db", o.held);
    await runFirstRelease(fleet, o.runs, o.operatorArgs);
  }, 300_000);
  afterAll(async () => {
    await fleet.stop();
    if (ns) await kubectl(["delete", "namespace", ns, "--wait=false"]);
  }, 60_000);
  return { fleet, ns: () => ns };
}
