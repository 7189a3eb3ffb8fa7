import { execFile } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import path from "node:path";
import type { ControlPlaneState } from "../../src/controlplane/instance.js";

const run = promisify(execFile);

/** How long the CRDs may take to be Established (kubectl wait's own timeout, as before). */
const ESTABLISHED_MS = 60_000;

/** The pinned kubectl on `state`'s control plane, as its admin. */
function kubectlOn(state: ControlPlaneState): { kubectl: string; env: NodeJS.ProcessEnv } {
  return {
    kubectl: path.join(state.binDir, "kubectl"),
    env: { ...process.env, KUBECONFIG: state.kubeconfig },
  };
}

/** `kubectl apply --server-side -f PATH` (a file or a folder) with the pinned kubectl. */
export async function applyFile(state: ControlPlaneState, file: string): Promise<void> {
  const { kubectl, env } = kubectlOn(state);
  await run(kubectl, ["apply", "--server-side", "--force-conflicts", "-f", file], { env });
}

/** `kubectl apply -f DIR` with the pinned kubectl, then waits for every CRD to be Established. */
export async function applyManifests(state: ControlPlaneState, dir: string): Promise<void> {
  await applyFile(state, dir);
  const { kubectl, env } = kubectlOn(state);
  // kubectl wait fails at once, rather than waiting, on a CRD the API server has not given a
  // status yet (`.status.conditions accessor error: <nil> is of the type <nil>`: seen on
  // 2026-12-05, the integration tier's setup then failed whole): asked again until the deadline.
  const deadline = Date.now() + ESTABLISHED_MS;
  for (;;) {
    const left = Math.max(1, Math.ceil((deadline - Date.now()) / 1000));
    try {
      await run(
        kubectl,
        ["wait", "--for=condition=Established", `--timeout=${left}s`, "crd", "--all"],
        { env },
      );
      return;
    } catch (e) {
      const stderr = String((e as { stderr?: unknown }).stderr ?? "");
      if (!stderr.includes("accessor error") || Date.now() > deadline) throw e;
      await sleep(250);
    }
  }
}
