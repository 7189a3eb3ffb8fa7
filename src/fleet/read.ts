// Reads the Clusters and Machines of many kubeconfig contexts at once, each within its own
// deadline. A context that does not answer in time, refuses the credentials, or cannot be
// reached at all becomes a row that says so; it never fails the whole read, and it never
// holds the others up (every context is read concurrently, and a read past its deadline is
// aborted, so no connection outlives the command).
import { CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { CLUSTER_PLURAL, GROUP, MACHINE_PLURAL, VERSION } from "../api/index.js";
import type { Cluster, Machine } from "../api/index.js";
import { errorCode, errorText } from "../errors.js";
import { deadline, type Deadline } from "./abort.js";
import { forContext } from "./contexts.js";
import { contextRows, type FleetRow } from "./row.js";

export interface ReadOptions {
  /** Each context's deadline for both of its reads (ms). */
  timeoutMs: number;
  /** A label selector on Clusters (e.g. liken.sh/ring=canary). */
  selector?: string;
  now?: Date;
}

/** What went wrong with a context, in one line: the timeout, or the error and its cause. */
export function failureText(e: unknown, timeoutMs: number, timedOut: boolean): string {
  if (timedOut) return `no answer within ${timeoutMs / 1000}s`;
  const parts: string[] = [];
  let cur: unknown = e;
  for (let i = 0; i < 4 && cur !== undefined && cur !== null; i++) {
    const text = errorText(cur).split("\n")[0]!.trim();
    const code = errorCode(cur);
    const line = code !== undefined && !text.includes(code) ? `${text} (${code})` : text;
    if (line !== "" && !parts.some((p) => p.includes(line))) parts.push(line);
    cur = (cur as { cause?: unknown }).cause;
  }
  const all = parts.join(": ") || "unknown error";
  return all.length > 300 ? `${all.slice(0, 299)}…` : all;
}

async function listAll<T>(
  api: CustomObjectsApi,
  plural: string,
  d: Deadline,
  labelSelector?: string,
): Promise<T[]> {
  const list = (await api.listClusterCustomObject(
    { group: GROUP, version: VERSION, plural, ...(labelSelector ? { labelSelector } : {}) },
    d.options,
  )) as { items: T[] };
  return list.items;
}

/** The rows of one context, or one row saying why it gave none. */
export async function readContext(
  kc: KubeConfig,
  context: string,
  o: ReadOptions,
): Promise<FleetRow[]> {
  const d = deadline(o.timeoutMs);
  try {
    const api = forContext(kc, context).makeApiClient(CustomObjectsApi);
    const [clusters, machines] = await Promise.all([
      listAll<Cluster>(api, CLUSTER_PLURAL, d, o.selector),
      listAll<Machine>(api, MACHINE_PLURAL, d),
    ]);
    return contextRows(context, clusters, machines, o.now);
  } catch (e) {
    return [{ context, unreachable: failureText(e, o.timeoutMs, d.passed()) }];
  } finally {
    d.done();
  }
}

/** Every context's rows, in the order of `contexts`; all read at once. */
export async function readFleet(
  kc: KubeConfig,
  contexts: readonly string[],
  o: ReadOptions,
): Promise<FleetRow[]> {
  const each = await Promise.all(contexts.map((c) => readContext(kc, c, o)));
  return each.flat();
}
