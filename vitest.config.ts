import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";
import TimeReporter from "./test/support/time-reporter.js";

// One project per test tier (docs/style.md, "Tests"). Each tier has its own npm script; `npm test`
// runs them all. Integration files run side by side, each on a real control plane of its own
// while it runs (started by globalSetup, one per worker), and isolate themselves by namespace
// or by unique object names as well. Where the time goes and the budgets: docs/testing.md, "Time".

/**
 * Test files that mostly wait on a control plane run this many at a time: one more than the
 * cores, at least 2, at most 4 (three on two cores). An integration file spends most of its
 * time waiting on watches, agents and deadlines (load average 0.35 on 2 cores during
 * identity-rotation), so the others fill that wait: on 2 cores, with three at a time, the tier's
 * 58 files (1,534 s summed) took 558 s, 2.75 files at once on average, all passing, while other
 * engineers' runs kept the load average at 10-17 (docs/testing.md, "Time").
 * LIKEN_TEST_WORKERS sets it (1 is the old one-at-a-time run, for a comparison or a bisection).
 */
const WAITING_WORKERS = Number(
  process.env.LIKEN_TEST_WORKERS ?? Math.max(2, Math.min(4, availableParallelism() + 1)),
);

/** .ci/run sets it: each run writes its own and its files' times there (time-reporter.ts). */
const TIME_DIR = process.env.LIKEN_TIME_DIR;

export default defineConfig({
  test: {
    reporters: TIME_DIR === undefined ? ["default"] : ["default", new TimeReporter(TIME_DIR)],
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          testTimeout: 10_000,
          // Every core: vitest's default leaves one for itself (one worker on two cores), and
          // the unit files are CPU and nothing else.
          maxWorkers: availableParallelism(),
        },
      },
      {
        test: {
          name: "native",
          include: ["test/native/**/*.test.ts"],
          testTimeout: 60_000,
          // Loop devices and the SIGKILL tests' timing: one file at a time.
          fileParallelism: false,
        },
      },
      {
        // WAITING_WORKERS files at a time, each on a control plane of its own for as long as
        // it runs (test/support/controlplane-lease.ts): a cluster-operator is cluster-wide by
        // design (it reconciles every Cluster and Machine, holds the one leader Lease in
        // liken-system, writes the one eviction webhook, approves every machine certificate
        // request), so two files' operators on one control plane would act on each other's
        // fleets. Each file ends failing if a process it started still runs or a namespace it
        // created is left (liken-system and liken-heartbeats are the setup's, made once).
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/support/controlplane-setup.ts"],
          setupFiles: ["test/support/controlplane-lease.ts"],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          maxWorkers: WAITING_WORKERS,
        },
      },
      {
        // The lab, end to end: `npm run lab -- --demo` as a newcomer runs it, watched from
        // outside with kubectl. One file at a time: the lab is one per checkout by design (its
        // .lab directory, .lab/kubeconfig, the pid file, the Cluster "lab"; a second lab stops
        // the first), and every e2e file (torture.test.ts too) starts one.
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          testTimeout: 900_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        // The operator image (npm run image) run under runc against a real control plane.
        test: {
          name: "image",
          include: ["test/image/**/*.test.ts"],
          globalSetup: ["test/support/controlplane-setup.ts"],
          testTimeout: 300_000,
          // Cold, the setup builds umoci, runc and promtool and the image's base layer.
          hookTimeout: 3_600_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: "qemu",
          include: ["test/qemu/**/*.test.ts"],
          testTimeout: 600_000,
          // Each file boots guests under TCG (one vCPU each) and starts its own control plane:
          // a second file at once would only share the same two cores. Within a file, guests
          // run side by side up to the cores: machine.test.ts runs its two bootloaders at once
          // from 2 cores (test/qemu/machine-plan.ts, sideBySide), as the image's smoke boot and
          // the testbed already did.
          fileParallelism: false,
        },
      },
    ],
  },
});
