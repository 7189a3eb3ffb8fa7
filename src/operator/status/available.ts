// The AVAILABLE column (`kubectl get clusters`), pure: the newest release the channel announces,
// and whether it is one this Cluster cannot take as it is. A person who sees a newer release
// there reads it as "upgrade to this"; when it is the release that failed here or was revoked,
// the column says so, and the channel's word (status.available) stays as it was.
import type { Machine, RevokedRelease } from "../../api/index.js";

export function availableText(
  available: string | null | undefined,
  machines: readonly Machine[],
  revoked: readonly RevokedRelease[] | undefined,
): string | undefined {
  // null: a status an older writer left (it read as nothing announced).
  if (available === undefined || available === null) return undefined;
  if ((revoked ?? []).some((r) => r.version === available)) return `${available} (revoked)`;
  const failedOn = machines
    .filter((m) => (m.status?.failedReleases ?? []).some((f) => f.version === available))
    .map((m) => m.metadata.name)
    .sort();
  if (failedOn.length === 0) return available;
  const more = failedOn.length > 1 ? ` +${failedOn.length - 1}` : "";
  return `${available} (failed on ${failedOn[0]}${more})`;
}
