// The Cluster the API tests start from: one catalog entry and spec.version pointing at it, the
// smallest object the API server accepts. Each test file registers its own cleanup.
import type { Cluster, LikenApi } from "../../src/api/index.js";

/** The one release the starting Cluster catalogs, and its (made-up) release.yaml digest. */
export const VERSION_A = "2026.10.10-001";
export const DIGEST_A = `sha256:${"a".repeat(64)}`;

export function clusterObject(name: string): Cluster {
  return {
    apiVersion: "liken.sh/v1alpha1",
    kind: "Cluster",
    metadata: { name },
    spec: {
      version: VERSION_A,
      releases: {
        source: "https://releases.liken.sh",
        catalog: [{ version: VERSION_A, digest: DIGEST_A }],
      },
    },
  };
}

/** Creates the starting Cluster through `api` (whose identity the test chooses). */
export function createCluster(api: LikenApi, name: string): Promise<Cluster> {
  return api.clusters.create(clusterObject(name));
}
