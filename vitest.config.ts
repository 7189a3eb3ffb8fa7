import { defineConfig } from "vitest/config";

// One project per test tier (docs/style.md, "Tests"). Each tier has its own npm script; `npm test`
// runs them all. Integration tests share one real control plane started by globalSetup and
// isolate themselves by namespace or by unique object names.
export default defineConfig({
  test: {
    projects: [
      {
        test: { name: "unit", include: ["test/unit/**/*.test.ts"], testTimeout: 10_000 },
      },
      {
        test: {
          name: "native",
          include: ["test/native/**/*.test.ts"],
          testTimeout: 60_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/support/controlplane-setup.ts"],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        // The lab, end to end: `npm run lab -- --demo` as a newcomer runs it, watched from
        // outside with kubectl. It starts its own control plane (the lab's).
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          testTimeout: 900_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: "qemu",
          include: ["test/qemu/**/*.test.ts"],
          testTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
