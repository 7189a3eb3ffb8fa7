// `liken drain` and `liken uncordon` against the real API server. The command group runs in
// this process (a spawned `liken` spends most of its time starting up on a loaded machine);
// what it prints is captured from stdout and stderr.
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { Command } from "commander";
import { CoreV1Api } from "@kubernetes/client-node";
import { registerDrain } from "../../src/cli/commands/drain.js";
import { createKwokNode, kubeConfig, kubeconfigPath, uniqueName } from "../support/kube.js";
import { remove } from "../support/drain-helpers.js";

const core = kubeConfig().makeApiClient(CoreV1Api);
const nodes: string[] = [];
afterAll(async () => {
  for (const n of nodes) await remove(["node", n]);
});
afterEach(() => {
  vi.restoreAllMocks();
});

async function liken(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, "write").mockImplementation((s) => out.push(String(s)) > 0);
  vi.spyOn(process.stderr, "write").mockImplementation((s) => err.push(String(s)) > 0);
  const program = new Command("liken").exitOverride();
  registerDrain(program);
  try {
    await program.parseAsync(["node", "liken", ...args, "--kubeconfig", kubeconfigPath()]);
  } finally {
    vi.restoreAllMocks();
  }
  return { stdout: out.join(""), stderr: err.join("") };
}

describe("liken drain / liken uncordon", () => {
  it("drains (cordoning the node) and uncordons what it cordoned", async () => {
    const node = uniqueName("drain-cli");
    nodes.push(node);
    await createKwokNode(node);

    const drained = await liken(["drain", node, "--timeout", "30s"]);
    expect(drained.stderr).toContain(`node ${node} cordoned`);
    expect(drained.stdout).toMatch(
      new RegExp(
        `^node ${node} drained in [0-9.]+ s: 0 pod\\(s\\) evicted, 0 left on the node\\n$`,
      ),
    );
    const cordoned = await core.readNode({ name: node });
    expect(cordoned.spec?.unschedulable).toBe(true);
    expect(cordoned.metadata?.annotations?.["liken.sh/cordoned-by"]).toBe("liken");

    expect((await liken(["uncordon", node])).stdout).toBe(`node ${node} uncordoned\n`);
    expect((await core.readNode({ name: node })).spec?.unschedulable).toBeFalsy();
    expect((await liken(["uncordon", node])).stdout).toBe(
      `node ${node} is not cordoned by liken: nothing to do\n`,
    );
  });

  it("refuses a bad duration and a bad driver selector", async () => {
    await expect(liken(["drain", "n", "--timeout", "5x"])).rejects.toThrow(/not a duration/);
    await expect(liken(["drain", "n", "--driver-pods", "gpu.example.com"])).rejects.toThrow(
      /not DRIVER=SELECTOR/,
    );
  });
});
