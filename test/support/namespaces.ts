// Namespaces on a test control plane, and whether a test file left one: a file deletes what it
// made (createNamespace and deleteNamespaces, kube.ts), and the integration tier's setup file
// fails a file that leaves one (controlplane-lease.ts). liken-system and liken-heartbeats are
// the tier's, made once per control plane (controlplane-setup.ts), never a file's.
import type { CoreV1Api, V1Namespace } from "@kubernetes/client-node";

export interface NamespaceSeen {
  name: string;
  /** Its deletion began (metadata.deletionTimestamp): the namespace controller is emptying it. */
  deleting: boolean;
}

function seen(n: V1Namespace): NamespaceSeen {
  return {
    name: n.metadata?.name ?? "",
    deleting: n.metadata?.deletionTimestamp !== undefined,
  };
}

export async function listNamespaces(core: CoreV1Api): Promise<NamespaceSeen[]> {
  return (await core.listNamespace()).items.map(seen);
}

/**
 * What a file did with the namespaces that were not there when it began: `left` are there and
 * not being deleted (it forgot them), `deleting` are on their way out (it deleted them).
 */
export function namespacesOfFile(
  before: ReadonlySet<string>,
  now: readonly NamespaceSeen[],
): { left: string[]; deleting: string[] } {
  const made = now.filter((n) => !before.has(n.name));
  return {
    left: made
      .filter((n) => !n.deleting)
      .map((n) => n.name)
      .sort(),
    deleting: made
      .filter((n) => n.deleting)
      .map((n) => n.name)
      .sort(),
  };
}

/**
 * Deletes the namespaces `names`; one already being deleted or gone is no error. It does not
 * wait for them to be gone: the namespace controller empties a namespace with pods in about
 * 10 s (controlplane.test.ts: 3.4 s of tests became 13.5 s when it waited), time every such
 * file would add to the tier, and a name a file made is never made again.
 */
export async function deleteNamespaces(core: CoreV1Api, names: readonly string[]): Promise<void> {
  await Promise.all(
    names.map((name) =>
      core.deleteNamespace({ name }).catch((e: unknown) => {
        // 404: gone; 409: already being deleted ("The system is ensuring all content is
        // removed from this namespace").
        const code = (e as { code?: number }).code;
        if (code !== 404 && code !== 409) throw e;
      }),
    ),
  );
}
