// A real control plane owned by this process, for a test run that starts its own: the
// integration tier's globalSetup (controlplane-setup.ts) and the machine scenario's host
// (test/qemu/machine-host.ts). The control plane's reaper (src/controlplane/reaper.ts, in its
// own process group) stops it if this process dies without stopping it, by SIGKILL too.
import { spawn } from "node:child_process";
import path from "node:path";
import {
  down,
  up,
  type ControlPlaneState,
  type UpOptions,
} from "../../src/controlplane/instance.js";
import { REPO_ROOT } from "../../src/controlplane/paths.js";

export interface OwnedControlPlane {
  state: ControlPlaneState;
  /** Takes the control plane down, then stops its reaper. */
  stop(): Promise<void>;
}

/**
 * up() under this process's ownership. The reaper starts first, so a process killed halfway
 * through `up` is covered too; if up fails, what it started is taken down and the reaper stopped.
 */
export async function upOwned(
  name: string,
  log: (line: string) => void,
  opts: Pick<UpOptions, "signingDurationSeconds" | "rotatableClientCa"> = {},
): Promise<OwnedControlPlane> {
  const stopReaper = startReaper(name);
  const stop = async (): Promise<void> => {
    await down(name);
    stopReaper();
  };
  try {
    return { state: await up({ name, ownerPid: process.pid, log, ...opts }), stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

function startReaper(name: string): () => void {
  const reaper = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      path.join(REPO_ROOT, "src", "controlplane", "reaper.ts"),
      String(process.pid),
      name,
    ],
    { detached: true, stdio: "ignore", cwd: REPO_ROOT },
  );
  reaper.unref();
  return () => {
    try {
      if (reaper.pid !== undefined) process.kill(reaper.pid);
    } catch {
      // already gone
    }
  };
}
