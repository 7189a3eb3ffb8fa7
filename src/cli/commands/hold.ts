// `liken machine hold MACHINE` and `liken machine unhold MACHINE`: a person keeps one machine at
// the release it runs (an investigation, a workload that must not move today) while the rest
// of the fleet rolls on. The hold is Machine spec.hold {version, by, at, reason}: its agent
// downloads and asks for nothing and undoes what it began (a download, a drain not yet past),
// cluster-operator grants it no turn and counts it apart in MACHINES ("9/11, 1 held"), and
// RolloutComplete names it. Unhold removes the field; the machine then catches up by itself.
import type { Command } from "commander";
import { isConflict, type Machine } from "../../api/index.js";
import { rfc3339 } from "../../api/time.js";
import { OperatorError } from "../../operator/errors.js";
import { likenApi, loadKubeConfig, whoAmI } from "./people.js";

interface HoldFlags {
  reason?: string;
  kubeconfig?: string;
}

/** The Machine, or a refusal that says it does not exist and how to list them. */
function existing(name: string, m: Machine | undefined, verb: string): Machine {
  if (m === undefined) {
    throw new OperatorError(
      "LIKEN_OPERATOR_NOT_FOUND",
      `Machine ${name} does not exist: nothing ${verb}; list them with kubectl get machines`,
    );
  }
  return m;
}

/** Patches spec.hold (a value, or null to remove it), conditioned, again after a conflict. */
async function patchHold(
  api: ReturnType<typeof likenApi>,
  name: string,
  make: (m: Machine) => Record<string, unknown> | null | undefined,
  verb: string,
): Promise<Machine | undefined> {
  for (let attempt = 1; ; attempt++) {
    const m = existing(name, await api.machines.find(name), verb);
    const hold = make(m);
    if (hold === undefined) return undefined; // nothing to change
    try {
      return await api.machines.patch(
        name,
        { spec: { hold } },
        { resourceVersion: m.metadata.resourceVersion! },
      );
    } catch (e) {
      if (isConflict(e) && attempt < 5) continue; // its agent or a person wrote: read again
      throw e;
    }
  }
}

async function hold(name: string, f: HoldFlags): Promise<void> {
  const kc = loadKubeConfig(f.kubeconfig);
  const api = likenApi(kc);
  const by = await whoAmI(kc);
  const at = rfc3339(new Date());
  let was: Machine["spec"]["hold"];
  let version: string | undefined;
  await patchHold(
    api,
    name,
    (m) => {
      was = m.spec.hold;
      version = m.status?.version;
      return {
        ...(version === undefined ? {} : { version }),
        by,
        at,
        ...(f.reason === undefined ? {} : { reason: f.reason }),
      };
    },
    "held",
  );
  const before = was === undefined ? "" : ` (it was held by ${was.by} since ${was.at}; replaced)`;
  process.stdout.write(
    `held Machine ${name} at ${version ?? "the release it runs"} as ${by} at ${at}${before}.\n` +
      "It downloads and asks for nothing; a download or a drain it began is undone, a trial boot under way finishes.\n" +
      `The rollout goes on without it. Release it with: liken machine unhold ${name}\n`,
  );
}

async function unhold(name: string, f: HoldFlags): Promise<void> {
  const api = likenApi(loadKubeConfig(f.kubeconfig));
  let was: Machine["spec"]["hold"];
  const done = await patchHold(
    api,
    name,
    (m) => {
      was = m.spec.hold;
      return was === undefined ? undefined : null;
    },
    "released",
  );
  if (done === undefined || was === undefined) {
    process.stdout.write(`Machine ${name} is not held: nothing to release.\n`);
    return;
  }
  process.stdout.write(
    `released Machine ${name} (held by ${was.by} since ${was.at}). It moves to the Cluster's target within the disruption budget, as any machine.\n`,
  );
}

/** The two subcommands, under `liken machine`. */
export function registerHold(machine: Command): void {
  machine
    .command("hold <machine>")
    .description(
      "hold MACHINE at the release it runs: the rollout skips it until `liken machine unhold`",
    )
    .option("--reason <text>", "why (shown in the Machine's status message)")
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .action((name: string, f: HoldFlags) => hold(name, f));
  machine
    .command("unhold <machine>")
    .description("release a held MACHINE: it moves to the Cluster's target like any other")
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .action((name: string, f: HoldFlags) => unhold(name, f));
}
