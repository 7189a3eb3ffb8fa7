import { defineConfig } from "vitest/config";

// One project per test tier (STYLE.md, "Tests"). Each tier has its own npm script; `npm test`
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
    ],
  },
});
