// The release to promote, as the source channel's own signed metadata names it (the publisher's
// repository on disk): its digest, and the root a Cluster of the ring pins.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { readRepo, tufDir } from "../release/tuf.js";
import { releasesOf } from "../verify/tuf-target.js";
import { compareVersions } from "../release-decision/version-order.js";
import { PromoteError } from "./errors.js";
import type { SourceRelease } from "./check.js";

/** The release `version` of channel `from` (unset: its newest not recalled nor yet in `to`). */
export async function sourceRelease(
  repo: string,
  from: string,
  to: string,
  version: string | undefined,
): Promise<SourceRelease> {
  const r = await readRepo(repo);
  const rootBytes = await readFile(path.join(tufDir(repo), "1.root.json"));
  const rootDigest = `sha256:${createHash("sha256").update(rootBytes).digest("hex")}`;
  const targets = r.targets.signed.targets as unknown as Parameters<typeof releasesOf>[0];
  const inFrom = releasesOf(targets, from).sort((a, b) => compareVersions(a.version, b.version));
  const inTo = new Set(releasesOf(targets, to).map((x) => x.version));
  const pick =
    version === undefined
      ? inFrom.filter((x) => x.recalled === undefined && !inTo.has(x.version)).at(-1)
      : inFrom.find((x) => x.version === version);
  if (pick === undefined) {
    const what =
      version === undefined ? `no release that ${to} does not name yet` : `no release ${version}`;
    throw new PromoteError(
      "LIKEN_PROMOTE_NOT_IN_SOURCE",
      `channel ${from} of ${repo} names ${what} (it names: ${inFrom.map((x) => x.version).join(", ") || "none"}); nothing to promote`,
      { context: { from, to, version } },
    );
  }
  if (pick.recalled !== undefined) {
    throw new PromoteError(
      "LIKEN_PROMOTE_NOT_IN_SOURCE",
      `channel ${from} recalled ${pick.version} at ${pick.recalled.at} (${pick.recalled.reason}): a recalled release is never promoted`,
      { context: { from, version: pick.version } },
    );
  }
  return { channel: from, rootDigest, version: pick.version, digest: pick.digest };
}
