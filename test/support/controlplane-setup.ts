// vitest globalSetup of the integration tier: one real control plane for the whole run.
// It is owned by this process: a reaper tears it down if the runner is killed
// (controlplane-owned.ts), and the next run sweeps whatever a killed run left behind.
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { ensureBinaries } from "../../src/controlplane/build.js";
import { sweepOrphans, type ControlPlaneState } from "../../src/controlplane/instance.js";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { useCliBundle } from "../../src/cli/entry.js";
import { applyManifests } from "./apply.js";
import { upOwned } from "./controlplane-owned.js";
import { startPrebuild } from "./prebuild.js";

declare module "vitest" {
  export interface ProvidedContext {
    controlPlane: ControlPlaneState;
  }
}

/**
 * The controller manager's longest certificate in this tier: machine certificates live 90 s,
 * so an agent renews at 63-81 s (70-90 %) and a test sees it rotate twice in under three
 * minutes, with 9 s or more left for a renewal on a busy machine (test/integration/
 * identity-rotation.test.ts). Nothing else in the tier uses the CSR signers.
 */
export const TEST_SIGNING_DURATION_SECONDS = 90;

const log = (l: string): void => {
  process.stderr.write(`${l}\n`);
};

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await sweepOrphans(log);
  await ensureBinaries(log);
  // On a cold machine the later tiers' Go builds run beside this tier's tests, which mostly
  // wait; on a warm one every tool is ready and this ends at once.
  const prebuilt = startPrebuild(log);
  // Agents, operators and downloads the tests start run from one bundle of the CLI (a tsx
  // start per process costs seconds of CPU; the tests start dozens).
  await useCliBundle();
  const name = `test-${process.pid}`;
  const started = Date.now();
  const { state, stop } = await upOwned(name, log, {
    signingDurationSeconds: TEST_SIGNING_DURATION_SECONDS,
  });
  try {
    const crdDir = path.join(REPO_ROOT, "config", "crd");
    if (existsSync(crdDir) && readdirSync(crdDir).some((f) => f.endsWith(".yaml"))) {
      await applyManifests(state, crdDir);
    }
  } catch (e) {
    await stop();
    await prebuilt();
    throw e;
  }
  log(
    `liken: test control plane ${state.server} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  project.provide("controlPlane", state);
  return async () => {
    await stop();
    await prebuilt();
  };
}
