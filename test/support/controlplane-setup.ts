// vitest globalSetup of the integration and image tiers: real control planes for the whole run,
// one per worker (the project's maxWorkers). Each test file takes one for itself while it runs
// (controlplane-lease.ts), so files run side by side never share a control plane: a
// cluster-operator reconciles every Cluster and Machine of its control plane, holds its one
// leader Lease, writes its one eviction webhook and approves its certificate requests. They are
// owned by this process: a reaper tears each down if the runner is killed
// (controlplane-owned.ts), and the next run sweeps whatever a killed run left behind.
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { ensureBinaries } from "../../src/controlplane/build.js";
import { sweepOrphans, type ControlPlaneState } from "../../src/controlplane/instance.js";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { useCliBundle } from "../../src/cli/entry.js";
import { applyFile, applyManifests } from "./apply.js";
import { upOwned } from "./controlplane-owned.js";
import { startPrebuild } from "./prebuild.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The first of controlPlanes: a file that takes no lease uses it. */
    controlPlane: ControlPlaneState;
    /** One per worker; a file leases one (controlplane-lease.ts). */
    controlPlanes: ControlPlaneState[];
  }
}

/**
 * The controller manager's longest certificate in this tier: machine certificates live 90 s,
 * so an agent renews at 63-81 s (70-90 %) and a test sees it rotate twice in under three
 * minutes, with 9 s or more left for a renewal on a busy machine (test/integration/
 * identity-rotation.test.ts). identity-lockout.test.ts, which waits for a certificate to
 * expire, starts a control plane of its own that signs 30 s ones (short-certificates.ts).
 */
export const TEST_SIGNING_DURATION_SECONDS = 90;

const log = (l: string): void => {
  process.stderr.write(`${l}\n`);
};

/**
 * The product's own namespaces (config/rbac/namespaces.yaml: liken-system, liken-heartbeats),
 * created once per control plane, as an install creates them, and never by a test file. Many
 * files need them, at the fixed names the product uses (the operator's leader Lease and webhook
 * Secret, the agents' heartbeat Leases), and no file may delete them when it ends: a namespace
 * being deleted refuses new objects, so the next file on that control plane could not create
 * its Lease or Secret there until the namespace controller had emptied it. Made here, they are
 * no file's leftover, and controlplane-lease.ts can fail a file that leaves any other namespace.
 */
async function applySharedNamespaces(state: ControlPlaneState): Promise<void> {
  await applyFile(state, path.join(REPO_ROOT, "config", "rbac", "namespaces.yaml"));
}

/**
 * One control plane per worker; fewer when the command line names fewer test files (a run of
 * one file starts one).
 */
function planesFor(project: TestProject): number {
  const workers = Math.max(1, Number(project.config.maxWorkers) || 1);
  const named = process.argv.filter((a) => /\.test\.ts$/.test(a)).length;
  return named > 0 ? Math.min(workers, named) : workers;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await sweepOrphans(log);
  await ensureBinaries(log);
  // On a cold machine the later tiers' Go builds run beside this tier's tests, which mostly
  // wait; on a warm one every tool is ready and this ends at once.
  const prebuilt = startPrebuild(log);
  // Agents, operators and downloads the tests start run from one bundle of the CLI (a tsx
  // start per process costs seconds of CPU; the tests start dozens).
  await useCliBundle();
  const count = planesFor(project);
  const started = Date.now();
  const planes = await Promise.allSettled(
    Array.from({ length: count }, (_, i) =>
      upOwned(count === 1 ? `test-${process.pid}` : `test-${process.pid}-${i + 1}`, log, {
        signingDurationSeconds: TEST_SIGNING_DURATION_SECONDS,
      }),
    ),
  );
  const up = planes.flatMap((p) => (p.status === "fulfilled" ? [p.value] : []));
  const stopAll = async (): Promise<void> => {
    await Promise.all(up.map((p) => p.stop()));
    await prebuilt();
  };
  try {
    const failed = planes.find((p) => p.status === "rejected");
    if (failed !== undefined) throw failed.reason;
    const crdDir = path.join(REPO_ROOT, "config", "crd");
    if (existsSync(crdDir) && readdirSync(crdDir).some((f) => f.endsWith(".yaml"))) {
      for (const p of up) await applyManifests(p.state, crdDir);
    }
    for (const p of up) await applySharedNamespaces(p.state);
  } catch (e) {
    await stopAll();
    throw e;
  }
  const servers = up.map((p) => p.state.server).join(", ");
  log(
    `liken: ${up.length === 1 ? "test control plane" : `${up.length} test control planes`} ${servers} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  project.provide("controlPlane", up[0]!.state);
  project.provide(
    "controlPlanes",
    up.map((p) => p.state),
  );
  return stopAll;
}
