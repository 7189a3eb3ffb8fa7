import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { KUBERNETES_VERSION, type Binary } from "./versions.js";

/** The repository root (this file is src/controlplane/paths.ts). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where built binaries are cached, outside the repository, keyed by version. */
export function cacheRoot(): string {
  return process.env.LIKEN_CACHE_DIR ?? path.join(os.homedir(), ".cache", "liken");
}

export function k8sCacheDir(version = KUBERNETES_VERSION): string {
  return path.join(cacheRoot(), "k8s", `v${version}`);
}

export function binDir(version = KUBERNETES_VERSION): string {
  return path.join(k8sCacheDir(version), "bin");
}

export function binaryPath(name: Binary, version = KUBERNETES_VERSION): string {
  return path.join(binDir(version), name);
}

/** Running control planes keep their data, logs, certificates and pid records here. */
export function clustersDir(): string {
  return process.env.LIKEN_CLUSTERS_DIR ?? path.join(REPO_ROOT, ".lab", "clusters");
}
