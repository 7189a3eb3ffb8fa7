import { execFile } from "node:child_process";
import { promisify } from "node:util";
import path from "node:path";
import type { ControlPlaneState } from "../../src/controlplane/instance.js";

const run = promisify(execFile);

/** `kubectl apply -f DIR` with the pinned kubectl, then waits for every CRD to be Established. */
export async function applyManifests(state: ControlPlaneState, dir: string): Promise<void> {
  const kubectl = path.join(state.binDir, "kubectl");
  const env = { ...process.env, KUBECONFIG: state.kubeconfig };
  await run(kubectl, ["apply", "--server-side", "--force-conflicts", "-f", dir], { env });
  await run(kubectl, ["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"], {
    env,
  });
}
