// Reading a release's revert floor (release.yaml revertFloor): the document is fetched from
// spec.releases.source and verified against the catalog digest like every release document
// (src/verify), so a channel cannot lower the floor of a release the Cluster trusts. The read
// is cached by digest (a digest names one document, for ever). Only the reading lives here:
// whether a revert may go below it is the release decision's (src/release-decision/decide.ts, `floor`).
import { errorText } from "../../errors.js";
import { MAX_RELEASE_BYTES, releaseBase, verifyRelease } from "../../verify/release.js";
import { fetchDocument } from "../../verify/fetch.js";
import type { Cluster, ReleaseRef } from "../../api/index.js";
import type { FloorRead } from "../../release-decision/decide.js";

/**
 * How long an unread floor stays unread before it is read again: the channel was down or the
 * document did not verify; a revert waits for it, so not long. 15 s is a few operator ticks.
 */
export const FLOOR_RETRY_MS = 15_000;

export async function readFloor(cluster: Cluster, r: ReleaseRef): Promise<FloorRead> {
  try {
    const url = new URL("release.yaml", releaseBase(cluster.spec.releases.source, r.version));
    const bytes = await fetchDocument(url, MAX_RELEASE_BYTES);
    const release = verifyRelease(bytes, r);
    return release.revertFloor === undefined
      ? { kind: "read" }
      : { kind: "read", floor: release.revertFloor };
  } catch (e) {
    return { kind: "unread", message: errorText(e) };
  }
}

/** The floors read, by digest; an unread one is forgotten after FLOOR_RETRY_MS. */
export class FloorCache {
  private readonly reads = new Map<string, FloorRead>();
  private readonly inFlight = new Set<string>();

  view(): ReadonlyMap<string, FloorRead> {
    return this.reads;
  }

  /** Starts a read of `r`'s floor unless one is known or running; `done` when it is in. */
  want(cluster: Cluster, r: ReleaseRef, done: () => void): void {
    if (this.reads.has(r.digest) || this.inFlight.has(r.digest)) return;
    this.inFlight.add(r.digest);
    void readFloor(cluster, r).then((read) => {
      this.inFlight.delete(r.digest);
      this.reads.set(r.digest, read);
      if (read.kind === "unread") {
        setTimeout(() => {
          this.reads.delete(r.digest);
          done();
        }, FLOOR_RETRY_MS).unref();
      }
      done();
    });
  }
}
