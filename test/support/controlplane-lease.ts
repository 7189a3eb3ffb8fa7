// vitest setupFile of the integration tier, whose files run side by side (vitest.config.ts):
//   - before the file loads, it takes one of the run's control planes for itself
//     (controlplane-setup.ts starts one per worker), so a file never shares its control plane
//     with a file running at the same time;
//   - after the file's own afterAll hooks (this file's hooks are registered first, so its
//     afterAll runs last), the file fails if a process it started still runs (then killed),
//     or if it left a namespace it created and did not delete (then deleted), naming each. The
//     product's namespaces, liken-system and liken-heartbeats, are the tier's
//     (controlplane-setup.ts), no file's;
//   - it deletes the Machines and Clusters left on the control plane (also before the file
//     starts: a worker killed mid-file leaves them), so that the next file's operator does not
//     inherit another file's fleet;
//   - it gives the control plane back.
// The lease is a file in the control plane's data directory holding the worker's pid: a worker
// that died without giving it back holds it no longer.
import { linkSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { threadId } from "node:worker_threads";
import path from "node:path";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, inject } from "vitest";
import type { ControlPlaneState } from "../../src/controlplane/instance.js";
import { loadKubeConfig } from "../../src/api/kubeconfig.js";
import { useControlPlane } from "./kube.js";
import { describeProcesses, descendants, processTable, workerHelper } from "./leftovers.js";
import { deleteNamespaces, listNamespaces, namespacesOfFile } from "./namespaces.js";

/** A process sent SIGTERM in a cleanup may take a moment to exit. */
const GRACE_MS = 15_000;
/** All control planes busy can only be a worker between two files: it gives one back soon. */
const LEASE_DEADLINE_MS = 600_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Takes the lease file of `plane` if it is free or its holder is dead. The file is made whole
 * and then linked into place (link fails if the name exists), so no worker ever reads a lease
 * that is there but empty: with open("wx") then write, three workers starting at once read an
 * empty lease as a dead holder's, removed it, and two files ran on one control plane (each
 * deleting the other's Clusters: ten files failed in one run on 2026-12-05).
 */
function tryLease(plane: ControlPlaneState): string | undefined {
  const file = path.join(plane.dataDir, "test-lease");
  const mine = `${file}.${process.pid}.${threadId}`;
  writeFileSync(mine, String(process.pid));
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        linkSync(mine, file);
        return file;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        const holder = Number(readFileSync(file, "utf8").trim());
        if (!Number.isInteger(holder) || holder <= 0 || alive(holder)) return undefined;
        rmSync(file, { force: true }); // its holder died: the control plane is free
      }
    }
    return undefined;
  } finally {
    rmSync(mine, { force: true });
  }
}

async function lease(): Promise<{ plane: ControlPlaneState; file: string } | undefined> {
  const planes = inject("controlPlanes") ?? [];
  if (planes.length === 0) return undefined;
  const until = Date.now() + LEASE_DEADLINE_MS;
  for (;;) {
    for (const plane of planes) {
      const file = tryLease(plane);
      if (file !== undefined) return { plane, file };
    }
    if (Date.now() > until) {
      throw new Error(
        `no free test control plane in ${LEASE_DEADLINE_MS / 1000} s (held by pids in ${planes
          .map((p) => path.join(p.dataDir, "test-lease"))
          .join(", ")})`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

function core(plane: ControlPlaneState): CoreV1Api {
  return loadKubeConfig(plane.kubeconfig).makeApiClient(CoreV1Api);
}

/**
 * Deletes every Machine and Cluster on the control plane. Each file's cluster-operator
 * reconciles every Cluster it finds, so one a file left behind (Lost machines, a channel whose
 * server is gone) would be the next file's operator's work too, and delay or mark what that
 * file waits for. They are cluster-scoped and carry no finalizer: deleted at once.
 * Not cleared (docs/testing.md, "Time"): Nodes, certificate signing requests, the liken Leases
 * and the eviction webhook's configuration. Cleared as well on 2026-12-05, the whole tier had
 * two files fail on one control plane that pass alone (drain-cli's fresh Node got a pod to
 * evict; agent-trial-not-armed's machine never held), so they stay until that is understood.
 */
async function clearFleet(plane: ControlPlaneState): Promise<void> {
  const api = loadKubeConfig(plane.kubeconfig).makeApiClient(CustomObjectsApi);
  for (const plural of ["machines", "clusters"]) {
    await api
      .deleteCollectionClusterCustomObject({ group: "liken.sh", version: "v1alpha1", plural })
      .catch(() => undefined); // no CRD yet: nothing to delete
  }
}

const held = await lease();
useControlPlane(held?.plane);
if (held !== undefined) await clearFleet(held.plane);
const namespacesBefore =
  held === undefined
    ? undefined
    : new Set((await listNamespaces(core(held.plane))).map((n) => n.name));
const testPath = expect.getState().testPath;
const file = testPath === undefined ? "this test file" : path.relative(process.cwd(), testPath);

beforeAll(() => {
  if (held !== undefined) {
    // Named in the file's output, so a failure says which control plane (and port) it used.
    console.log(`liken: ${file} runs on control plane ${held.plane.name} (${held.plane.server})`);
  }
});

afterAll(async () => {
  // Every check runs, and what it finds is cleared, whatever an earlier one found: the next
  // file on this control plane starts clean, and this one's failure names all it left.
  const failures: string[] = [];
  const check = async (step: () => Promise<void>): Promise<void> => {
    await step().catch((e: unknown) => {
      failures.push(e instanceof Error ? e.message : String(e));
    });
  };
  try {
    await check(noProcessLeft);
    if (held !== undefined && namespacesBefore !== undefined) {
      const { plane } = held;
      await check(() => noNamespaceLeft(plane, namespacesBefore));
      await check(() => clearFleet(plane));
    }
  } finally {
    if (held !== undefined) rmSync(held.file, { force: true });
    useControlPlane(undefined);
  }
  if (failures.length > 0) throw new Error(failures.join("\n"));
}, GRACE_MS + 30_000);

async function noProcessLeft(): Promise<void> {
  const deadline = Date.now() + GRACE_MS;
  let left = descendants(process.pid, processTable(), workerHelper);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    left = descendants(process.pid, processTable(), workerHelper);
  }
  if (left.length === 0) return;
  for (const p of left) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(
    `${file} left ${left.length} process(es) running ${GRACE_MS / 1000} s after its last ` +
      `afterAll (now killed); a test must stop what it starts:\n${describeProcesses(left)}`,
  );
}

/**
 * Fails the file if a namespace it created is still there and not being deleted: a test must
 * delete what it creates (createNamespace and afterAll(deleteNamespaces), kube.ts). They are
 * deleted here too, so that the next file on this control plane does not inherit them. One the
 * file deleted is on its way out, which is the namespace controller's work, not waited for.
 */
async function noNamespaceLeft(plane: ControlPlaneState, before: Set<string>): Promise<void> {
  const api = core(plane);
  const { left } = namespacesOfFile(before, await listNamespaces(api));
  if (left.length === 0) return;
  await deleteNamespaces(api, left);
  throw new Error(
    `${file} left ${left.length} namespace(s) on ${plane.name} (now deleted); a test must ` +
      `delete what it creates (createNamespace and afterAll(deleteNamespaces), ` +
      `test/support/kube.ts): ${left.join(", ")}`,
  );
}
