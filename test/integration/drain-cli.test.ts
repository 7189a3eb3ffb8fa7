// `liken drain` and `liken uncordon` as a person runs them, against the real API server.
// (Each run of the CLI costs seconds of start-up on a loaded machine: the cases that need
// no CLI are in drain.test.ts.)
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { CoreV1Api } from "@kubernetes/client-node";
import { createKwokNode, kubeConfig, kubeconfigPath, uniqueName } from "../support/kube.js";
import { remove } from "../support/drain-helpers.js";

const run = promisify(execFile);
const core = kubeConfig().makeApiClient(CoreV1Api);
const nodes: string[] = [];
afterAll(async () => {
  for (const n of nodes) await remove(["node", n]);
});

async function liken(args: string[]) {
  const env = { ...process.env, KUBECONFIG: kubeconfigPath() };
  try {
    const r = await run("./bin/liken.js", args, { env });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

describe("liken drain / liken uncordon", () => {
  it("drains (cordoning the node) and uncordons what it cordoned", async () => {
    const node = uniqueName("drain-cli");
    nodes.push(node);
    await createKwokNode(node);

    const drained = await liken(["drain", node, "--timeout", "30s"]);
    expect(drained).toMatchObject({ code: 0 });
    expect(drained.stderr).toContain(`node ${node} cordoned`);
    expect(drained.stdout).toMatch(
      new RegExp(
        `^node ${node} drained in [0-9.]+ s: 0 pod\\(s\\) evicted, 0 left on the node\\n$`,
      ),
    );
    const cordoned = await core.readNode({ name: node });
    expect(cordoned.spec?.unschedulable).toBe(true);
    expect(cordoned.metadata?.annotations?.["liken.sh/cordoned-by"]).toBe("liken");

    expect(await liken(["uncordon", node])).toMatchObject({
      code: 0,
      stdout: `node ${node} uncordoned\n`,
    });
    expect((await core.readNode({ name: node })).spec?.unschedulable).toBeFalsy();
  });
});
