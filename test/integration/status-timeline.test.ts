// `liken status CLUSTER --timeline FILE` as a person runs it: started before a rollout, it
// records the Cluster and its Machines through the real API server while the real operator
// grants turns to a played fleet (a leader and a worker), ends by itself when the rollout
// settles, and leaves an SVG with one row per machine, its steps, and each turn marked (the
// leader's in red).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { likenEntry } from "../../src/cli/entry.js";
import { kubeconfigPath, uniqueName, waitFor } from "../support/kube.js";
import {
  fileCleanups,
  playFleet,
  stagedStatus,
  startedOperator,
  writeStatus,
  type MachinePlan,
} from "./operator-fleet.js";

const cleanups = fileCleanups("each");

describe("liken status --timeline", () => {
  it("records a rollout until it settles and draws each machine's steps and turns", async () => {
    const cluster = uniqueName("timeline");
    const plans: MachinePlan[] = [
      { name: uniqueName("l1"), role: "Leader" },
      { name: uniqueName("w1") },
    ];
    const { names } = await playFleet(cleanups, cluster, plans, {
      cluster: { maxUnavailable: 1 },
      sim: { downMs: [800, 1000] },
    });
    await startedOperator(cleanups, ["--start-grace", "1s"]);

    const dir = mkdtempSync(path.join(tmpdir(), "liken-timeline-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, "rollout.svg");
    const cli = spawn(
      process.execPath,
      [likenEntry(), "status", cluster, "--timeline", file, "--kubeconfig", kubeconfigPath()],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let said = "";
    cli.stderr.on("data", (b: Buffer) => (said += b.toString()));
    const exited = new Promise<number | null>((r) => cli.once("exit", (code) => r(code)));
    cleanups.push(async () => {
      if (cli.exitCode === null) cli.kill("SIGKILL");
    });
    await waitFor("the recording to start", async () => said.includes("recording the rollout"), {
      timeoutMs: 30_000,
    });

    for (const p of plans) await writeStatus(p.name, stagedStatus());
    const { code } = await waitFor(
      "liken status --timeline to end once the rollout settles",
      async () => (cli.exitCode === null ? undefined : { code: await exited }),
      { timeoutMs: 90_000, intervalMs: 200 },
    );
    expect(code, said).toBe(0);
    expect(said).toContain(`wrote ${file}: 2 machine(s)`);

    const svg = readFileSync(file, "utf8");
    expect(svg).toContain(`>${names[0]} (leader)</text>`);
    expect(svg).toContain(`>${names[1]}</text>`);
    for (const step of ["UpdatePending", "Updating", "Ready"])
      for (const n of names)
        expect(svg, `${n} ${step}`).toMatch(new RegExp(`<title>${n}: ${step} on`));
    expect(svg).toMatch(
      new RegExp(`<title>${names[0]} held a reboot turn for [0-9.]+ s \\(a leader down\\)`),
    );
    expect(svg).toMatch(new RegExp(`<title>${names[1]} held a reboot turn for [0-9.]+ s</title>`));
  });
});
