// vitest setupFile of the integration tier, whose files run side by side (vitest.config.ts):
//   - before the file loads, it takes one of the run's control planes for itself
//     (controlplane-setup.ts starts one per worker), so a file never shares its control plane
//     with a file running at the same time;
//   - after the file's own afterAll hooks (this file's hooks are registered first, so its
//     afterAll runs last), the file fails if a process it started still runs (then killed),
//     and the namespaces it created and left are named in a warning (not deleted: the next file
//     on this control plane may create the same shared one, liken-system, and a namespace being
//     deleted refuses new objects);
//   - it deletes the Machines and Clusters left on the control plane (also before the file
//     starts: a worker killed mid-file leaves them), so that the next file's operator does not
//     inherit another file's fleet;
//   - it gives the control plane back.
// The lease is a file in the control plane's data directory holding the worker's pid: a worker
// that died without giving it back holds it no longer.
import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import path from "node:path";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, inject } from "vitest";
import type { ControlPlaneState } from "../../src/controlplane/instance.js";
import { loadKubeConfig } from "../../src/api/kubeconfig.js";
import { useControlPlane } from "./kube.js";
import { describeProcesses, descendants, processTable, workerHelper } from "./leftovers.js";

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

/** Takes the lease file of `plane` if it is free or its holder is dead. */
function tryLease(plane: ControlPlaneState): string | undefined {
  const file = path.join(plane.dataDir, "test-lease");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return file;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const holder = Number(readFileSync(file, "utf8").trim());
      if (Number.isInteger(holder) && holder > 0 && alive(holder)) return undefined;
      rmSync(file, { force: true }); // its holder died: the control plane is free
    }
  }
  return undefined;
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

async function namespaces(plane: ControlPlaneState): Promise<Set<string>> {
  const core = loadKubeConfig(plane.kubeconfig).makeApiClient(CoreV1Api);
  const list = await core.listNamespace();
  return new Set(list.items.map((n) => n.metadata?.name ?? ""));
}

/**
 * Deletes every Machine and Cluster on the control plane. Each file's cluster-operator
 * reconciles every Cluster it finds, so one a file left behind (Lost machines, a channel whose
 * server is gone) would be the next file's operator's work too, and delay or mark what that
 * file waits for. They are cluster-scoped and carry no finalizer: deleted at once.
 */
async function clearLiken(plane: ControlPlaneState): Promise<void> {
  const api = loadKubeConfig(plane.kubeconfig).makeApiClient(CustomObjectsApi);
  for (const plural of ["machines", "clusters"]) {
    await api
      .deleteCollectionClusterCustomObject({ group: "liken.sh", version: "v1alpha1", plural })
      .catch(() => undefined); // no CRD yet: nothing to delete
  }
}

const held = await lease();
useControlPlane(held?.plane);
if (held !== undefined) await clearLiken(held.plane);
const namespacesBefore = held === undefined ? undefined : await namespaces(held.plane);
const testPath = expect.getState().testPath;
const file = testPath === undefined ? "this test file" : path.relative(process.cwd(), testPath);

beforeAll(() => {
  if (held !== undefined) {
    // Named in the file's output, so a failure says which control plane (and port) it used.
    console.log(`liken: ${file} runs on control plane ${held.plane.name} (${held.plane.server})`);
  }
});

afterAll(async () => {
  try {
    await noProcessLeft();
    if (held !== undefined && namespacesBefore !== undefined) await namespacesLeft(held.plane);
    if (held !== undefined) await clearLiken(held.plane);
  } finally {
    if (held !== undefined) rmSync(held.file, { force: true });
    useControlPlane(undefined);
  }
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

async function namespacesLeft(plane: ControlPlaneState): Promise<void> {
  const now = await namespaces(plane);
  const left = [...now].filter((n) => !namespacesBefore!.has(n)).sort();
  if (left.length === 0) return;
  console.warn(
    `liken: ${file} left ${left.length} namespace(s) on ${plane.name}: ${left.join(", ")}`,
  );
}
