// `liken drain NODE` and `liken uncordon NODE`: the drain the agent runs on its turn, for a
// person to run by hand (to try a node's drain before a rollout, or to finish one).
import type { KubeConfig } from "@kubernetes/client-node";
import { InvalidArgumentError, type Command } from "commander";
import type { DrainProgress, DriverPodSelectors } from "../../drain/index.js";
import { parseMatchLabels } from "../../drain/selector.js";

/** A person waits at most this long by default; the agent sets its own (agent config). */
const DEFAULT_TIMEOUT = "10m";

export function registerDrain(program: Command): void {
  program
    .command("drain")
    .description(
      "cordon NODE and evict its pods: PodDisruptionBudgets apply, pods holding DRA claims leave before the pods of their drivers",
    )
    .argument("<node>", "the Node to drain")
    .option(
      "--timeout <duration>",
      `give up after this long (90s, 10m, 1h; default ${DEFAULT_TIMEOUT}); the node stays cordoned`,
      parseDuration,
    )
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .option(
      "--driver-pods <driver=selector>",
      "the pods that run a DRA driver, e.g. gpu.example.com=app=gpu-kubelet-plugin (repeatable)",
      collectDriverPods,
    )
    .action(
      async (
        node: string,
        o: { timeout?: number; kubeconfig?: string; driverPods?: DriverPodSelectors },
      ) => {
        // Loaded on use: the Kubernetes client is large, and `liken --help` should not wait for it.
        const { drainNode, blockerText, waitText } = await import("../../drain/index.js");
        const r = await drainNode(await loadKubeConfig(o.kubeconfig), node, {
          timeoutMs: o.timeout ?? parseDuration(DEFAULT_TIMEOUT),
          driverPods: o.driverPods ?? {},
          onProgress: (p) => {
            const line = progressLine(p, blockerText, waitText);
            if (line !== undefined) process.stderr.write(`${line}\n`);
          },
        });
        process.stdout.write(
          `node ${r.node} drained in ${(r.durationMs / 1000).toFixed(1)} s: ${r.evicted.length} pod(s) evicted, ${r.left.length} left on the node\n`,
        );
      },
    );

  program
    .command("uncordon")
    .description(
      "make NODE schedulable again, if liken cordoned it (a cordon by someone else stays)",
    )
    .argument("<node>", "the Node")
    .option("--kubeconfig <file>", "kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    .action(async (node: string, o: { kubeconfig?: string }) => {
      const { uncordonNode } = await import("../../drain/index.js");
      const r = await uncordonNode(await loadKubeConfig(o.kubeconfig), node);
      const said = {
        uncordoned: `node ${node} uncordoned`,
        "not-ours": `node ${node} was cordoned by someone else, not by liken: left cordoned (kubectl uncordon ${node} undoes it)`,
        "not-cordoned": `node ${node} is not cordoned by liken: nothing to do`,
      }[r];
      process.stdout.write(`${said}\n`);
    });
}

async function loadKubeConfig(file: string | undefined): Promise<KubeConfig> {
  const { loadKubeConfig: load } = await import("../../api/kubeconfig.js");
  return load(file);
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  const unit = UNIT_MS[m?.[2] ?? "s"];
  if (m === null || unit === undefined || Number(m[1]) <= 0) {
    throw new InvalidArgumentError(`"${text}" is not a duration such as 90s, 10m or 1h`);
  }
  return Math.round(Number(m[1]) * unit);
}

function collectDriverPods(text: string, acc: DriverPodSelectors = {}): DriverPodSelectors {
  const eq = text.indexOf("=");
  const selector = eq > 0 ? parseMatchLabels(text.slice(eq + 1)) : undefined;
  if (selector === undefined) {
    throw new InvalidArgumentError(
      `"${text}" is not DRIVER=SELECTOR, e.g. gpu.example.com=app=gpu-kubelet-plugin`,
    );
  }
  return { ...acc, [text.slice(0, eq)]: { selector } };
}

type Texts = typeof import("../../drain/index.js");

function progressLine(
  p: DrainProgress,
  blockerText: Texts["blockerText"],
  waitText: Texts["waitText"],
): string | undefined {
  switch (p.kind) {
    case "cordoned":
      return {
        cordon: `node ${p.node} cordoned`,
        "already-ours": `node ${p.node} already cordoned by liken`,
        "someone-elses": `node ${p.node} already cordoned by someone else (liken will not uncordon it)`,
      }[p.how];
    case "excluded":
      return `node ${p.node} out of the external load balancers; evicting in ${Math.round(p.waitMs / 1000)} s, when open connections have drained`;
    case "planned":
      return [
        ...p.plan.waves.map((w) => `plan: ${w.name}: ${w.pods.map((x) => x.pod).join(", ")}`),
        ...p.plan.left.map((l) => `plan: stays: ${l.pod} (${l.detail})`),
      ].join("\n");
    case "driver-unidentified":
      return `DRA driver ${p.driver} (claims ${p.claims.join(", ")}) runs in no pod liken can identify; kept until last: ${p.keptUntilLast.join(", ") || "none"}`;
    case "evicting":
      return `evicting ${p.pod} (${p.wave})`;
    case "blocked":
      return p.blocker.attempts === 1 ? `blocked: ${blockerText(p.blocker)}` : undefined;
    case "waiting":
      return p.waiting.map((w) => `waiting: ${waitText(w)}`).join("\n");
    case "warning":
      return `warning: ${p.message}`;
    case "finished":
      return undefined;
    default: {
      const never: never = p;
      return String(never);
    }
  }
}
