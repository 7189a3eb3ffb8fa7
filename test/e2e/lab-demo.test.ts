// The README's main job, end to end: `npm run lab -- --demo` on this clone, watched from
// outside by `kubectl get machines -w -o json` (not by liken's own logs): the LIKEN column
// changes to the new version one machine at a time, within the budget of one, and never
// two leaders at once.
import { readFileSync, statSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { LAB_VERSIONS } from "../../src/lab/lab.js";
import { LAB_TIMELINE } from "../../src/lab/paths.js";
import { runLab, stopLabs } from "./lab-support.js";

interface MachineJson {
  metadata: { name: string };
  spec: { role?: string };
  status?: { version?: string; step?: string };
}

afterAll(stopLabs);

describe("npm run lab -- --demo", () => {
  it("rolls the fleet forward one machine at a time and prints the summary", async () => {
    const started = Date.now();
    // Watched from outside as soon as the lab's API is installed.
    const seen = new Map<string, MachineJson>();
    const history: { updating: string[]; versions: Record<string, string | undefined> }[] = [];
    const onMachine = (m: MachineJson): void => {
      seen.set(m.metadata.name, m);
      const all = [...seen.values()];
      history.push({
        updating: all.filter((x) => x.status?.step === "Updating").map((x) => x.metadata.name),
        versions: Object.fromEntries(all.map((x) => [x.metadata.name, x.status?.version])),
      });
    };
    const { code, stdout, stderr } = await runLab(
      ["--demo"],
      [{ kind: "machines", onObject: onMachine }],
    );
    const target = LAB_VERSIONS[1];
    expect(stderr.slice(-2000) + stdout, "the demo's own output").toMatch(
      new RegExp(
        `lab: rollout to ${target.replace(/\./g, "\\.")} complete: 5/5 machines, max turns in flight 1, max leaders down 1, [0-9.]+ s\\n$`,
      ),
    );
    expect(code).toBe(0);
    // A person holds node-5 at its release: the rollout completes without it, MACHINES counts
    // it apart, and once released it takes its turn like any machine.
    expect(stderr).toContain(
      'demo: liken machine hold node-5 --reason "the demo holds one machine"',
    );
    expect(stderr).toContain("demo: MACHINES 4/4, 1 held");
    expect(stderr).toContain("demo: liken machine unhold node-5");

    // What kubectl saw: never two machines Updating at once (budget 1), and every machine's
    // LIKEN moved from the first release to the target exactly once.
    expect(history.length).toBeGreaterThan(10);
    expect(Math.max(...history.map((h) => h.updating.length))).toBe(1);
    for (const name of ["node-1", "node-2", "node-3", "node-4", "node-5"]) {
      const versions = history
        .map((h) => h.versions[name])
        .filter((v): v is string => v !== undefined);
      const changes = versions.filter((v, i) => i === 0 || v !== versions[i - 1]);
      expect(changes, `LIKEN of ${name} over time`).toEqual([LAB_VERSIONS[0], target]);
    }

    // The picture of this rollout (docs/timeline.md): written by this run, a row per machine,
    // each machine's turn marked, the leaders' in red.
    expect(stderr).toContain(`demo: the rollout's timeline: ${LAB_TIMELINE}`);
    expect(statSync(LAB_TIMELINE).mtimeMs).toBeGreaterThan(started);
    const svg = readFileSync(LAB_TIMELINE, "utf8");
    for (const name of ["node-1", "node-2", "node-3", "node-4", "node-5"]) {
      expect(svg, name).toMatch(new RegExp(`<title>${name} held a reboot turn for [0-9.]+`));
      expect(svg, name).toMatch(
        new RegExp(`<title>${name}: Ready on ${target.replace(/\./g, "\\.")}`),
      );
    }
    expect(svg).toMatch(/\(a leader down\)/);
  });
});
