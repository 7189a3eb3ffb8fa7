// The agent and its download child never load @kubernetes/client-node (about 70 MiB of RSS):
// the daemon, the lean CLI entry and the download path are imported in a fresh Node process
// whose module hook reports every package it resolves. docs/adr/agent-lean-api-client.md.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..", "..");
const dir = mkdtempSync(path.join(tmpdir(), "liken-lean-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The bare package names resolved while importing `modules` (paths under src/). */
function packagesLoadedBy(modules: string[]): string[] {
  const hook = path.join(dir, "hook.mjs");
  writeFileSync(
    hook,
    `export async function resolve(spec, ctx, next) {
  if (!/^(node:|\\.|\\/|file:)/.test(spec)) process.stderr.write("PACKAGE " + spec + "\\n");
  return next(spec, ctx);
}`,
  );
  const register = path.join(dir, "register.mjs");
  writeFileSync(
    register,
    `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hook).href)});`,
  );
  const code = modules
    .map((m) => `await import(${JSON.stringify(pathToFileURL(path.join(root, "src", m)).href)});`)
    .join("\n");
  const r = spawnSync(
    process.execPath,
    [
      "--import",
      "tsx",
      "--import",
      pathToFileURL(register).href,
      "--input-type=module",
      "-e",
      code,
    ],
    { cwd: root, encoding: "utf8" },
  );
  expect(r.status, r.stderr).toBe(0);
  return [...new Set([...r.stderr.matchAll(/^PACKAGE (\S+)$/gm)].map((m) => m[1]!))];
}

describe("what the agent loads", () => {
  it("the daemon and the lean CLI entry's commands load no client-node", () => {
    const loaded = packagesLoadedBy([
      "agent/daemon.ts",
      "cli/commands/agent.ts",
      "cli/commands/agent-run.ts",
    ]);
    expect(loaded).toContain("yaml"); // the hook sees packages at all
    expect(loaded.filter((p) => p.startsWith("@kubernetes/"))).toEqual([]);
  });

  it("the agent's metrics, when served, load prom-client and no client-node", () => {
    const loaded = packagesLoadedBy(["agent/metrics.ts", "metrics/serve.ts"]);
    expect(loaded).toContain("prom-client");
    expect(loaded.filter((p) => p.startsWith("@kubernetes/"))).toEqual([]);
  });

  it("the download child loads HTTP (undici), the writer and the release check, no client-node", () => {
    const loaded = packagesLoadedBy(["cli/commands/agent-slots.ts", "slots/stage.ts"]);
    expect(loaded).toContain("undici");
    expect(loaded.filter((p) => p.startsWith("@kubernetes/") || p === "pino")).toEqual([]);
  });
});
