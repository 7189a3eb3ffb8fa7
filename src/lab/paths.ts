// Where the lab keeps its files. Its own module so the reaper (src/lab/reaper.ts) can find a
// lab's leftovers without loading the lab itself.
import path from "node:path";
import { clustersDir, REPO_ROOT } from "../controlplane/paths.js";

/** Where the lab keeps everything; the README names .lab/kubeconfig. */
export const LAB_DIR = path.join(REPO_ROOT, ".lab");
export const LAB_KUBECONFIG = path.join(LAB_DIR, "kubeconfig");
export const LAB_CLUSTER = "lab";
/**
 * The rings scene's control plane of its own (`npm run lab -- --rings`, rings.ts): the early
 * ring's Cluster runs there, with its own cluster-operator. Its admin kubeconfig is written
 * beside the lab's, for kubectl from outside.
 */
export const LAB_RING_PLANE = "lab-early";
export const LAB_RING_KUBECONFIG = path.join(LAB_DIR, "early.kubeconfig");
/** One run's files: machines, channel, logs, operator kubeconfig. Wiped at every start. */
export const LAB_RUN_DIR = path.join(LAB_DIR, "lab");
/** The demo's picture of its rollout (docs/timeline.md); kept after the lab stops. */
export const LAB_TIMELINE = path.join(LAB_DIR, "timeline.svg");
/** What the reaper of a lab that did not stop by itself did, one line per reap. */
export const LAB_REAPER_LOG = path.join(LAB_DIR, "reaper.log");
/** The running lab's pid and start time (see reap.ts). */
export const LAB_PID_FILE = path.join(LAB_DIR, "lab.pid");

/**
 * Text that the command line of every process a lab starts contains, and no other process's:
 * agents, their downloads and operators name a file under LAB_RUN_DIR; the control plane's
 * components name its data directory (the rings scene's second control plane's too).
 */
export function labMarks(): string[] {
  return [
    `${LAB_RUN_DIR}${path.sep}`,
    `${path.join(clustersDir(), LAB_CLUSTER)}${path.sep}`,
    `${path.join(clustersDir(), LAB_RING_PLANE)}${path.sep}`,
  ];
}
