// What `liken check-install` concludes from the operator's Deployment and its pods, pure: an
// image the nodes cannot pull is said at once (not after a wait that can only time out), with
// the image and the way to set it (issue 42, item 9).
import type { V1Deployment, V1Pod } from "@kubernetes/client-node";

/** The kubelet's waiting reasons for an image it cannot get (kubelet images/types.go). */
export const PULL_FAILURES = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "ErrImageNeverPull",
]);

export type InstallVerdict =
  | { kind: "ready"; image: string; available: number }
  | { kind: "unpullable"; image: string; pod: string; reason: string; message: string }
  | { kind: "waiting"; image: string; why: string };

export function operatorImage(d: V1Deployment): string {
  return d.spec?.template.spec?.containers[0]?.image ?? "(none)";
}

type Unpullable = Extract<InstallVerdict, { kind: "unpullable" }>;

/** The first container a kubelet reports it cannot get the image of. */
function pullFailure(pods: readonly V1Pod[], image: string): Unpullable | undefined {
  for (const p of pods) {
    for (const s of p.status?.containerStatuses ?? []) {
      const w = s.state?.waiting;
      if (w?.reason === undefined || !PULL_FAILURES.has(w.reason)) continue;
      return {
        kind: "unpullable",
        image: s.image || image,
        pod: p.metadata?.name ?? "?",
        reason: w.reason,
        message: w.message ?? "",
      };
    }
  }
  return undefined;
}

export function installVerdict(d: V1Deployment, pods: readonly V1Pod[]): InstallVerdict {
  const image = operatorImage(d);
  const failed = pullFailure(pods, image);
  if (failed !== undefined) return failed;
  const available = d.status?.availableReplicas ?? 0;
  if (available > 0) return { kind: "ready", image, available };
  const phases = pods.map((p) => `${p.metadata?.name ?? "?"} ${p.status?.phase ?? "?"}`);
  return { kind: "waiting", image, why: phases.length === 0 ? "no pod yet" : phases.join(", ") };
}
