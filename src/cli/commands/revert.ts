// `liken rollout revert|pause|unrevoke CLUSTER` (and `resume CLUSTER` without a machine: the
// end of a pause): the fleet-wide switches of docs/revert.md. Each is one write conditioned on
// the Cluster's resourceVersion, so it acts on exactly the Cluster it printed; cluster-operator
// decides the rest (src/operator/revert/revert.ts).
import type { Command } from "commander";
import { isConflict, type Cluster, type LikenApi } from "../../api/index.js";
import { OperatorError, type OperatorCode } from "../../operator/errors.js";
import { revertRequestOf, unrevokeRequestOf } from "./revert-request.js";
import { rfc3339 } from "../../api/time.js";
import {
  isFleetSwitch,
  refuseStrayFleetFlags,
  switchContexts,
  withContextOptions,
  type SwitchFlags,
} from "./fleet.js";
import { likenApi, loadKubeConfig, whoAmI } from "./people.js";

const KUBECONFIG = "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)";
/** spec.rollout.revertRequest.reason and unrevoke.reason: their bound in the CRD. */
const REASON_MAX = 1024;
const ATTEMPTS = 5;

export function registerRevert(rollout: Command): void {
  rollout
    .command("revert")
    .description(
      "move every machine back to the last known good release (status.lastKnownGood) and revoke spec.version's release",
    )
    .argument("<cluster>", "the Cluster")
    .option("--reason <text>", "why (recorded with your name, shown in the condition and Event)")
    .option("--kubeconfig <file>", KUBECONFIG)
    .action(async (cluster: string, o: { kubeconfig?: string; reason?: string }) => {
      await revert(cluster, o);
    });

  withContextOptions(
    rollout
      .command("pause")
      .description(
        "stop every new reboot turn of the Cluster (downloads go on), or of every Cluster of many contexts at once (--contexts); `liken rollout resume` ends it",
      )
      .argument("[cluster]", "the Cluster (with --contexts: only this Cluster in each context)"),
    "pause in these kubeconfig contexts at once, comma-separated; says which it reached",
  )
    .option("--all-contexts", "pause in every context of the kubeconfig")
    .action(async (cluster: string | undefined, o: SwitchFlags) => {
      if (isFleetSwitch(o)) return switchContexts(cluster, true, o);
      refuseStrayFleetFlags(o, "pause");
      if (cluster === undefined) throw needsCluster("pause");
      await setPaused(cluster, true, o.kubeconfig);
    });

  rollout
    .command("unrevoke")
    .description(
      "clear a revoked release (status.revokedReleases) so that spec.version may name it again",
    )
    .argument("<cluster>", "the Cluster")
    .argument("<version>", "the revoked release")
    .option("--reason <text>", "why it is good after all (recorded with your name)")
    .option("--kubeconfig <file>", KUBECONFIG)
    .action(
      async (cluster: string, version: string, o: { kubeconfig?: string; reason?: string }) => {
        await unrevoke(cluster, version, o);
      },
    );
}

/** `pause` or `resume` with neither a Cluster nor --contexts. */
export function needsCluster(command: string): OperatorError {
  return usage(
    "LIKEN_OPERATOR_USAGE",
    `name the Cluster (liken rollout ${command} CLUSTER), or the contexts to ${command} at once (liken rollout ${command} --contexts a,b,c, or --all-contexts)`,
  );
}

function usage(code: OperatorCode, message: string): OperatorError {
  return new OperatorError(code, message);
}

async function getCluster(api: LikenApi, name: string): Promise<Cluster> {
  const c = await api.clusters.find(name);
  if (c === undefined) {
    throw usage(
      "LIKEN_OPERATOR_NOT_FOUND",
      `Cluster ${name} does not exist; list them with kubectl get clusters`,
    );
  }
  return c;
}

/** The API as the person the kubeconfig names, and their name as the API server knows it. */
async function asPerson(kubeconfig: string | undefined): Promise<{ api: LikenApi; by: string }> {
  const kc = loadKubeConfig(kubeconfig);
  return { api: likenApi(kc), by: await whoAmI(kc) };
}

/** Refuses a --reason longer than spec.rollout.<field>.reason holds, before any write. */
function checkReason(reason: string | undefined, field: "revertRequest" | "unrevoke"): void {
  if (reason === undefined || reason.length <= REASON_MAX) return;
  throw usage(
    "LIKEN_OPERATOR_USAGE",
    `--reason has ${reason.length} characters; spec.rollout.${field}.reason holds at most ${REASON_MAX}: say it shorter. Nothing was written`,
  );
}

/** Runs `write` on the Cluster as read, again on a 409 (someone wrote in between). */
async function guarded<T>(
  api: LikenApi,
  name: string,
  write: (c: Cluster) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const c = await getCluster(api, name);
    try {
      return await write(c);
    } catch (e) {
      if (isConflict(e) && attempt < ATTEMPTS) continue;
      throw e;
    }
  }
}

async function revert(cluster: string, o: { kubeconfig?: string; reason?: string }): Promise<void> {
  const { api, by } = await asPerson(o.kubeconfig);
  checkReason(o.reason, "revertRequest");
  const done = await guarded(api, cluster, async (c) => {
    const machines = (await api.machines.list({ fieldSelector: `spec.cluster=${cluster}` })).items;
    const ask = revertRequestOf(c, machines, {
      by,
      at: rfc3339(new Date()),
      ...(o.reason === undefined ? {} : { reason: o.reason }),
    });
    await api.clusters.patch(
      cluster,
      { spec: { rollout: { revertRequest: ask.request } } },
      { resourceVersion: c.metadata.resourceVersion! },
    );
    return ask;
  });
  process.stdout.write(
    `asked cluster-operator to revert ${done.from.version} to ${done.to.version} in Cluster ${cluster} as ${by}\n` +
      `It checks the floor ${done.from.version} declares, revokes it, and moves every machine back under the budget; machines whose other slot holds ${done.to.version} reboot into it without a download.\n` +
      `Watch with: liken status ${cluster}\n`,
  );
}

/** spec.rollout.paused; exported for `liken rollout resume CLUSTER`. */
export async function setPaused(
  cluster: string,
  paused: boolean,
  kubeconfig: string | undefined,
): Promise<void> {
  const { api, by } = await asPerson(kubeconfig);
  await guarded(api, cluster, async (c) => {
    if (!paused && c.spec.rollout?.paused !== true) {
      throw usage(
        "LIKEN_OPERATOR_USAGE",
        `Cluster ${cluster} is not paused; to release a stalled turn name the Machine: liken rollout resume ${cluster} <machine> --reason "..." (or --failed-release for a ReleaseFailed rollout)`,
      );
    }
    await api.clusters.patch(
      cluster,
      { spec: { rollout: { paused } } },
      { resourceVersion: c.metadata.resourceVersion! },
    );
  });
  process.stdout.write(
    paused
      ? `paused Cluster ${cluster} as ${by}: no new reboot turn until \`liken rollout resume ${cluster}\`; downloads go on, turns held finish\n`
      : `resumed Cluster ${cluster} as ${by}: cluster-operator grants turns again\n`,
  );
}

async function unrevoke(
  cluster: string,
  version: string,
  o: { kubeconfig?: string; reason?: string },
): Promise<void> {
  const { api, by } = await asPerson(o.kubeconfig);
  checkReason(o.reason, "unrevoke");
  const entry = await guarded(api, cluster, async (c) => {
    const unrevoke = unrevokeRequestOf(c, version, {
      by,
      at: rfc3339(new Date()),
      ...(o.reason === undefined ? {} : { reason: o.reason }),
    });
    await api.clusters.patch(
      cluster,
      { spec: { rollout: { unrevoke } } },
      { resourceVersion: c.metadata.resourceVersion! },
    );
    return unrevoke;
  });
  process.stdout.write(
    `cleared the revocation of ${entry.version} in Cluster ${cluster} as ${by} (spec.rollout.unrevoke): ` +
      `cluster-operator removes it from status.revokedReleases and spec.version may name it again\n`,
  );
}
