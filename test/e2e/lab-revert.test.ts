// Issue 27's "done when", end to end on this clone: `npm run lab -- --revert` rolls the fleet
// onto a release that proves and is promoted everywhere, moves the lab's clock an hour on, and
// the release's service gate fails on the machines; cluster-operator reverts by itself on
// spec.rollout.revert's threshold. Checked from outside the lab, by `kubectl get clusters -w`
// and `kubectl get machines -w` (the API server), and from the lab's own observer (its
// printed figures): every machine back on the good release, none downloading a byte, the gate
// named, the release revoked and refused again, the budget and the leader rule held.
import { afterAll, describe, expect, it } from "vitest";
import { LAB_VERSIONS } from "../../src/lab/lab.js";
import { LAB_BAD_VERSION, LAB_TRIPPED_GATE, type RevertFigures } from "../../src/lab/revert.js";
import { runLab, stopLabs } from "./lab-support.js";

interface Obj {
  metadata: { name: string };
  spec: { role?: string; version?: string };
  status?: {
    version?: string;
    step?: string;
    revert?: {
      from: { version: string };
      to: { version: string };
      trigger: string;
      reason?: string;
      gate?: string;
    };
    revokedReleases?: { version: string; reason: string }[];
    rebootTurns?: { machine: string; leader?: boolean }[];
    conditions?: { type: string; reason: string; status: string }[];
  };
}

afterAll(stopLabs);

async function runScenario(how: "threshold" | "command"): Promise<{
  figures: RevertFigures;
  clusters: Obj[];
  machines: Map<string, Obj>[];
  out: string;
}> {
  const clusters: Obj[] = [];
  const machines: Map<string, Obj>[] = [];
  const seen = new Map<string, Obj>();
  const { code, stdout, stderr } = await runLab(
    [`--revert=${how}`],
    [
      { kind: "clusters", onObject: (c: Obj) => clusters.push(c) },
      {
        kind: "machines",
        onObject: (m: Obj) => {
          seen.set(m.metadata.name, m);
          machines.push(new Map(seen));
        },
      },
    ],
  );
  const out = stderr.slice(-3000) + stdout;
  expect(code, out).toBe(0);
  const line = /lab: figures: (\{.*\})\n/.exec(stdout);
  expect(line, out).not.toBeNull();
  return { figures: JSON.parse(line![1]!) as RevertFigures, clusters, machines, out };
}

const GOOD = LAB_VERSIONS[0];
const NODES = ["node-1", "node-2", "node-3", "node-4", "node-5"];

/** What both ways share: the fleet back without a download, within the rules, refused again. */
function checkReverted(r: Awaited<ReturnType<typeof runScenario>>, trigger: string): void {
  const f = r.figures;
  // The observer's figures: everyone back, budget 1 and one leader at a time held throughout.
  expect(f).toMatchObject({ from: LAB_BAD_VERSION, to: GOOD, machinesBack: 5, machines: 5 });
  expect(f.maxTurns).toBe(1);
  expect(f.maxUnavailable).toBeLessThanOrEqual(f.budget);
  expect(f.maxUnavailable).toBe(1);
  expect(f.maxLeadersDown).toBe(1);
  // No download: every machine's other slot held the good release.
  expect(f.downloaded).toEqual(Object.fromEntries(NODES.map((n) => [n, 0])));
  expect(f.channelBytes).toBe(0);
  expect(f.refused).toMatch(/^ReleaseRevoked: /);
  expect(r.out).toContain(`lab: ${LAB_BAD_VERSION} targeted again: ReleaseRevoked`);

  // The API server, as kubectl saw it: the revert recorded with its trigger, the release revoked.
  const reverted = r.clusters.find((c) => c.status?.revert !== undefined);
  expect(reverted?.status?.revert).toMatchObject({
    from: { version: LAB_BAD_VERSION },
    to: { version: GOOD },
    trigger,
  });
  const last = r.clusters.at(-1)!;
  expect(last.status?.revokedReleases?.map((x) => x.version)).toContain(LAB_BAD_VERSION);
  expect(last.spec.version).toBe(GOOD);
  // The refusal was on the API server too.
  expect(
    r.clusters.some((c) =>
      c.status?.conditions?.some((x) => x.type === "Progressing" && x.reason === "ReleaseRevoked"),
    ),
  ).toBe(true);
  // At every instant kubectl saw: at most one turn, at most one leader's.
  for (const c of r.clusters) {
    const turns = c.status?.rebootTurns ?? [];
    expect(turns.length).toBeLessThanOrEqual(1);
    expect(turns.filter((t) => t.leader).length).toBeLessThanOrEqual(1);
  }
  // Every machine went good, bad, good, and never Updating two at once.
  const final = r.machines.at(-1)!;
  for (const n of NODES) {
    expect(final.get(n)?.status?.version, n).toBe(GOOD);
    const versions = r.machines
      .map((s) => s.get(n)?.status?.version)
      .filter((v): v is string => v !== undefined);
    const changes = versions.filter((v, i) => i === 0 || v !== versions[i - 1]);
    expect(changes, `LIKEN of ${n} over time`).toEqual([GOOD, LAB_BAD_VERSION, GOOD]);
  }
  for (const s of r.machines) {
    expect([...s.values()].filter((m) => m.status?.step === "Updating").length).toBeLessThanOrEqual(
      1,
    );
  }
}

describe("npm run lab -- --revert", () => {
  it("threshold: the release goes bad an hour after promotion and the fleet goes back by itself, naming the gate", async () => {
    const started = Date.now();
    const r = await runScenario("threshold");
    checkReverted(r, "Automatic");
    expect(r.figures).toMatchObject({ reason: "RevertedOnHealthGate", gate: LAB_TRIPPED_GATE });
    expect(r.figures.message).toContain("spec.rollout.revert.maxFailures 2");
    const reverted = r.clusters.find((c) => c.status?.revert !== undefined);
    expect(reverted?.status?.revert).toMatchObject({
      reason: "RevertedOnHealthGate",
      gate: LAB_TRIPPED_GATE,
    });
    expect(r.out).toMatch(
      /lab: revert \(threshold\) of .*: RevertedOnHealthGate, gate command service; 5\/5 machines back/,
    );
    console.log(`lab --revert=threshold: ${((Date.now() - started) / 1000).toFixed(0)} s`);
  });

  it("command: liken rollout revert takes the fleet back the same way", async () => {
    const started = Date.now();
    const r = await runScenario("command");
    checkReverted(r, "Request");
    expect(r.figures).toMatchObject({ reason: "RevertedByRequest", gate: "" });
    console.log(`lab --revert=command: ${((Date.now() - started) / 1000).toFixed(0)} s`);
  });
});
