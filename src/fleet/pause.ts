// `liken rollout pause|resume --contexts ...`: one switch over many clusters. Each context is
// written concurrently within its own deadline; every Cluster's write is a merge patch of
// spec.rollout.paused conditioned on the resourceVersion it read (as `liken rollout pause
// CLUSTER` does), and the answer names, per context, what was done and what was not.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import type { KubeConfig } from "@kubernetes/client-node";
import { CLUSTER_PLURAL, GROUP, VERSION, type Cluster } from "../api/index.js";
import { deadline, type Deadline } from "./abort.js";
import { forContext } from "./contexts.js";
import { failureText } from "./read.js";

export interface SwitchOptions {
  /** true: pause; false: resume. */
  paused: boolean;
  /** Only this Cluster in each context (default: every Cluster, or those of `selector`). */
  cluster?: string;
  selector?: string;
  timeoutMs: number;
}

export type ClusterOutcome = "paused" | "resumed" | "already paused" | "not paused";

export interface ContextOutcome {
  context: string;
  /** Whether the context answered and every Cluster asked for is in the asked state. */
  reached: boolean;
  clusters: { cluster: string; outcome: ClusterOutcome }[];
  /** Why it was not reached (the timeout, the error, no such Cluster). */
  error?: string;
}

/** How many times a write refused with 409 (someone wrote in between) is read and tried again. */
const ATTEMPTS = 5;

function isConflict(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === 409;
}

async function switchOne(
  api: CustomObjectsApi,
  name: string,
  o: SwitchOptions,
  d: Deadline,
): Promise<ClusterOutcome> {
  for (let attempt = 1; ; attempt++) {
    const c = (await api.getClusterCustomObject(
      { group: GROUP, version: VERSION, plural: CLUSTER_PLURAL, name },
      d.options,
    )) as Cluster;
    const now = c.spec.rollout?.paused === true;
    if (now === o.paused) return o.paused ? "already paused" : "not paused";
    const body = {
      metadata: { resourceVersion: c.metadata.resourceVersion },
      spec: { rollout: { paused: o.paused } },
    };
    try {
      await api.patchClusterCustomObject(
        { group: GROUP, version: VERSION, plural: CLUSTER_PLURAL, name, body },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch, d.options),
      );
      return o.paused ? "paused" : "resumed";
    } catch (e) {
      if (isConflict(e) && attempt < ATTEMPTS) continue;
      throw e;
    }
  }
}

/** Pauses or resumes the Clusters of one context; never throws. */
export async function switchContext(
  kc: KubeConfig,
  context: string,
  o: SwitchOptions,
): Promise<ContextOutcome> {
  const d = deadline(o.timeoutMs);
  const done: ContextOutcome["clusters"] = [];
  try {
    const api = forContext(kc, context).makeApiClient(CustomObjectsApi);
    let names: string[];
    if (o.cluster !== undefined) names = [o.cluster];
    else {
      const list = (await api.listClusterCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: CLUSTER_PLURAL,
          ...(o.selector ? { labelSelector: o.selector } : {}),
        },
        d.options,
      )) as { items: Cluster[] };
      names = list.items.map((c) => c.metadata.name).sort();
    }
    if (names.length === 0) {
      const which = o.selector ? ` matching ${o.selector}` : "";
      return { context, reached: false, clusters: [], error: `holds no Cluster${which}` };
    }
    for (const name of names)
      done.push({ cluster: name, outcome: await switchOne(api, name, o, d) });
    return { context, reached: true, clusters: done };
  } catch (e) {
    const notFound = (e as { code?: unknown } | null)?.code === 404 && o.cluster !== undefined;
    // A write cut off by the deadline may have landed: say so rather than guess.
    const maybe = d.passed() ? "; the last write may or may not have landed: run it again" : "";
    const error = notFound
      ? `holds no Cluster ${o.cluster}`
      : `${failureText(e, o.timeoutMs, d.passed())}${maybe}`;
    return { context, reached: false, clusters: done, error };
  } finally {
    d.done();
  }
}

export async function switchFleet(
  kc: KubeConfig,
  contexts: readonly string[],
  o: SwitchOptions,
): Promise<ContextOutcome[]> {
  return Promise.all(contexts.map((c) => switchContext(kc, c, o)));
}

/** The report: a line per context, then a summary line. */
export function switchReport(outcomes: readonly ContextOutcome[], paused: boolean): string {
  const lines = outcomes.map((x) => {
    const what = x.clusters.map((c) => `${c.cluster} ${c.outcome}`).join(", ");
    if (x.reached) return `${x.context}: ${what}`;
    const before = what === "" ? "" : ` (before that: ${what})`;
    return `${x.context}: NOT REACHED: ${x.error ?? "unknown"}${before}`;
  });
  const reached = outcomes.filter((x) => x.reached).length;
  const verb = paused ? "paused" : "resumed";
  lines.push(`${verb} in ${reached} of ${outcomes.length} contexts`);
  return `${lines.join("\n")}\n`;
}
