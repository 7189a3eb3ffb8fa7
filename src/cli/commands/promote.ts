// `liken promote`: sign a release into the next channel on the evidence of the ring before it
// (src/promote, docs/rings.md). Wiring only: options to a PromoteRun, the outcome to stdout.
import { type Command, InvalidArgumentError } from "commander";
import { loadKubeConfig } from "../../api/kubeconfig.js";
import { promote } from "../../promote/promote.js";
import { durationSeconds, parsePolicy, readPolicyFile } from "../../promote/policy.js";
import { parseContextRef, type ContextRef } from "../../promote/read.js";
import { signOpts, withDirs, type Dirs } from "./release-channel.js";

const contexts = (v: string, prev: ContextRef[] = []): ContextRef[] => [
  ...prev,
  parseContextRef(v),
];
const whole = (v: string): number => {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`"${v}" is not a whole number`);
  return Number(v);
};
const soak = (v: string): number => {
  const s = durationSeconds(v);
  if (s === undefined)
    throw new InvalidArgumentError(`"${v}" is not a duration such as 24h or 3600s`);
  return s;
};

interface PromoteFlags extends Dirs {
  from: string;
  to: string;
  version?: string;
  context?: ContextRef[];
  kubeconfig?: string;
  policy?: string;
  minClusters?: number;
  minMachines?: number;
  maxFailedTrials?: number;
  soak?: number;
  dryRun?: boolean;
}

export function registerPromote(program: Command): void {
  withDirs(program.command("promote"))
    .description(
      "Sign a release into the next channel on the evidence of the ring that follows the source channel (read-only contexts)",
    )
    .requiredOption("--from <channel>", "the channel the ring follows (the source)")
    .requiredOption("--to <channel>", "the channel to sign the release into")
    .option("--version <version>", "the release (default: the newest of --from that --to lacks)")
    .option(
      "--context <name[/cluster]>",
      "a kubeconfig context of one cluster of the ring, read-only (repeat per cluster)",
      contexts,
    )
    .option(
      "--kubeconfig <file>",
      "kubeconfig holding the contexts (default: $KUBECONFIG or ~/.kube/config)",
    )
    .option(
      "--policy <file>",
      "a YAML policy {clusters, machines, failedTrials, soak}; flags override it",
    )
    .option("--min-clusters <n>", "clusters that must have proved it", whole)
    .option("--min-machines <n>", "machines, over those clusters, that must have proved it", whole)
    .option("--max-failed-trials <n>", "failed trials allowed over the ring (default 0)", whole)
    .option(
      "--soak <duration>",
      "how long each counted cluster ran it without a revert (24h)",
      soak,
    )
    .option("--dry-run", "check and tell, sign nothing")
    .action(async (o: PromoteFlags) => {
      const file = await readPolicyFile(o.policy);
      const flags = {
        ...(o.minClusters === undefined ? {} : { clusters: o.minClusters }),
        ...(o.minMachines === undefined ? {} : { machines: o.minMachines }),
        ...(o.maxFailedTrials === undefined ? {} : { failedTrials: o.maxFailedTrials }),
        ...(o.soak === undefined ? {} : { soakSeconds: o.soak }),
      };
      const policy = parsePolicy({ ...file, ...flags }, o.policy ?? "the flags");
      const r = await promote({
        ...signOpts(o),
        from: o.from,
        to: o.to,
        ...(o.version === undefined ? {} : { version: o.version }),
        contexts: o.context ?? [],
        kubeConfig: loadKubeConfig(o.kubeconfig),
        policy,
        dryRun: o.dryRun === true,
      });
      const lines = r.evidence.clusters.map(
        (c) =>
          `  ${c.context} (${c.cluster}): ${c.machines} machine(s), ${c.failedTrials} failed, ${c.soakSeconds} s without a revert`,
      );
      const verb = r.signed ? "promoted" : "would promote (dry run)";
      process.stdout.write(
        `${verb} ${r.version} (${r.digest}) from ${o.from} to ${o.to} on the evidence of ${r.evidence.clusters.length} cluster(s):\n${lines.join("\n")}\n` +
          r.same.map((n) => `  counted once: ${n}\n`).join("") +
          r.notes.map((n) => `  not counted: ${n}\n`).join(""),
      );
    });
}
