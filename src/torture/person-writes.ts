// A person's edits of the lab's Cluster during a torture run (a retarget, a bad release made the
// target, its revert threshold set and taken away), each tried again while the API server
// answers that it is busy or starting: a restart drawn just before must not fail the fault.
import { setTimeout as sleep } from "node:timers/promises";
import type { RevertPolicy } from "../api/types.js";
import type { Lab } from "../lab/lab.js";
import { LAB_CLUSTER } from "../lab/paths.js";
import type { LabRelease } from "../lab/releases.js";
import { STOPPED_POLL_MS } from "./fault-targets.js";

/** How long setting the target is tried again while the API server is busy or starting. */
const SET_TARGET_RETRY_MS = 30_000;

/** Catalogs `r` and makes it `spec.version` (setTargetOnce), as a person would (asPerson). */
export async function setTarget(
  lab: Lab,
  r: LabRelease,
  revert?: RevertPolicy | null,
): Promise<void> {
  await asPerson(() => setTargetOnce(lab, r, revert));
}

/** spec.rollout.revert set (null: taken away) as a person would, tried again as setTarget. */
export async function setRevertPolicy(lab: Lab, revert: RevertPolicy | null): Promise<void> {
  await asPerson(() => lab.api.clusters.patch(LAB_CLUSTER, { spec: { rollout: { revert } } }));
}

/**
 * A person's write, tried again while the API server answers that it is busy or starting (503
 * after a restart drawn just before: seen in seed 2's run), for up to SET_TARGET_RETRY_MS; any
 * other error, or one that lasts, fails the fault.
 */
async function asPerson(write: () => Promise<unknown>): Promise<void> {
  const from = Date.now();
  for (;;) {
    try {
      await write();
      return;
    } catch (e) {
      const retryable = (e as { retryable?: boolean }).retryable === true;
      if (!retryable || Date.now() - from > SET_TARGET_RETRY_MS) throw e;
      await sleep(STOPPED_POLL_MS);
    }
  }
}

/** `revert`: spec.rollout.revert set with the target (null: taken away; undefined: kept). */
async function setTargetOnce(lab: Lab, r: LabRelease, revert?: RevertPolicy | null): Promise<void> {
  const { api } = lab;
  const c = await api.clusters.get(LAB_CLUSTER);
  const catalog = c.spec.releases.catalog ?? [];
  await api.clusters.patch(LAB_CLUSTER, {
    spec: {
      ...(revert === undefined ? {} : { rollout: { revert } }),
      version: r.version,
      releases: {
        catalog: catalog.some((x) => x.version === r.version)
          ? catalog
          : [...catalog, { version: r.version, digest: r.digest }],
      },
    },
  });
}
