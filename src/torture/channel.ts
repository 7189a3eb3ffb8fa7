// The lab's channel signed for a run whose Cluster follows it (a run that drew a `recall`):
// `liken release sign` init, add and recall (src/release/tuf.ts, the CLI's code), on the
// directory the lab already serves over HTTP. The operator reads it with its TUF client, as a
// follower in a fleet would.
import path from "node:path";
import { LAB_CLUSTER, type Lab } from "../lab/lab.js";
import { LAB_DIR } from "../lab/paths.js";
import { followPatch } from "../lab/follow.js";
import { addRelease, initChannel, recallRelease } from "../release/tuf.js";

/** The channel the lab's Cluster follows. */
export const TORTURE_CHANNEL = "stable";

export class SignedChannel {
  readonly keys = path.join(LAB_DIR, "lab", "torture-keys");
  constructor(private readonly repo: string) {}

  /** Signs the channel afresh; returns the root digest a Cluster pins. */
  async init(): Promise<string> {
    return (await initChannel({ repo: this.repo, keys: this.keys })).rootDigest;
  }

  async publish(version: string): Promise<void> {
    await addRelease({ repo: this.repo, keys: this.keys, channel: TORTURE_CHANNEL, version });
  }

  async recall(version: string, reason: string): Promise<void> {
    await recallRelease({
      repo: this.repo,
      keys: this.keys,
      channel: TORTURE_CHANNEL,
      version,
      reason,
    });
  }
}

/**
 * The Cluster switched to follow the signed channel (spec.version unset: follow chooses), as a
 * person would with kubectl patch: the moment the target is set.
 */
export async function followChannel(lab: Lab, rootDigest: string): Promise<void> {
  await lab.api.clusters.patch(LAB_CLUSTER, followPatch(TORTURE_CHANNEL, rootDigest));
}
