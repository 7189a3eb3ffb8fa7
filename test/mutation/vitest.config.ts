// The tests StrykerJS runs against each mutant: the unit tier only. The pure decision
// modules are what it mutates, and their unit tests are what must notice a change; the
// slower tiers would make one run take hours on a small machine and add little here.
import path from "node:path";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    root: path.resolve(import.meta.dirname, "../.."),
    include: ["test/unit/**/*.test.ts"],
    testTimeout: 10_000,
  },
});
