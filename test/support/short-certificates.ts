// A control plane of the test file's own whose signer issues certificates of `seconds`, for a
// test that must see a real machine certificate expire (kube-controller-manager's
// --cluster-signing-duration caps what the kube-apiserver-client signer issues; a CSR's own
// spec.expirationSeconds cannot ask for less than 600 s). The tier's control planes issue 90 s
// certificates, which identity-rotation needs: a renewal at 70-90 % of them leaves 9 s or more
// on a busy machine. A test that waits for the expiry itself need not wait 90 s of it.
//
// While it runs, the file's helpers (kubeConfig(), kubectl(), controlPlane()) talk to it; the
// lease's control plane stays the file's, idle, and is given back as usual. Started in about
// 4 s on a quiet machine (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
// with liken's CRDs applied; stopped, with its reaper, by the returned function.
// ownControlPlane is the same for the other options a leased control plane cannot have (a
// client CA the test rotates: test/integration/identity-ca-rotation-live.test.ts).
import path from "node:path";
import type { ControlPlaneState, UpOptions } from "../../src/controlplane/instance.js";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { applyManifests } from "./apply.js";
import { upOwned } from "./controlplane-owned.js";
import { usedControlPlane, useControlPlane } from "./kube.js";

export interface ShortCertificates {
  state: ControlPlaneState;
  /** Stops the control plane and points the file's helpers back at its leased one. */
  stop(): Promise<void>;
}

export async function shortCertificateControlPlane(
  seconds: number,
  label: string,
): Promise<ShortCertificates> {
  return ownControlPlane(
    label,
    { signingDurationSeconds: seconds },
    `signs ${seconds} s certificates`,
  );
}

/**
 * A control plane of the test file's own, started with `opts` (what the leased ones cannot
 * have: a signer's duration, a client CA the test rotates), with liken's CRDs applied; the
 * file's helpers talk to it until stop().
 */
export async function ownControlPlane(
  label: string,
  opts: Pick<UpOptions, "signingDurationSeconds" | "rotatableClientCa">,
  why: string,
): Promise<ShortCertificates> {
  const back = usedControlPlane();
  const name = `test-${process.pid}-${label}`;
  const owned = await upOwned(
    name,
    (l) => {
      process.stderr.write(`${l}\n`);
    },
    opts,
  );
  try {
    await applyManifests(owned.state, path.join(REPO_ROOT, "config", "crd"));
  } catch (e) {
    await owned.stop();
    throw e;
  }
  useControlPlane(owned.state);
  console.log(`liken: ${name} (${owned.state.server}) ${why} for this file`);
  return {
    state: owned.state,
    async stop() {
      useControlPlane(back);
      await owned.stop();
    },
  };
}
