// The brakes in the lab, as the tour prints them and a newcomer runs them (each command through
// bash after the printed `export`):
//   - the printed maintenance window, closed now: the machines download and stage the next
//     release (Auto ones UpdatePending, Manual ones RebootPending) and no turn is granted;
//     `kubectl get clusters` reads OutsideMaintenanceWindow. The printed removal opens it and
//     the rollout goes;
//   - `npm run -s lab -- bad-release <version>`, catalogued and targeted: exactly one machine
//     tries it (its kernel panics, the firmware falls back), and the Cluster reads
//     ReleaseFailed while the others keep it staged.
import { afterAll, describe, expect, it } from "vitest";
import { LAB_CLUSTER, LAB_VERSIONS } from "../../src/lab/lab.js";
import { printed, startLab, stopLabs, tourShell, until } from "./lab-support.js";

const BAD = "2026.10.13-001";
afterAll(stopLabs, 120_000);

interface MachineView {
  spec: { rebootPolicy?: string };
  status?: {
    step?: string;
    version?: string;
    staged?: { version: string };
    lastTrial?: { version: string; result: string; reason: string };
    failedReleases?: { version: string }[];
  };
}
interface ClusterView {
  status?: {
    rebootTurns?: { machine: string; version: string }[];
    display?: string;
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}

describe("the brakes in the lab", () => {
  it("a closed window holds every turn while the machines stage; a bad release is tried by exactly one machine", async () => {
    const { lab, commands, exportLine } = await startLab();
    const { ok } = tourShell(exportLine);
    const machines = async (): Promise<Record<string, MachineView>> => {
      const j = JSON.parse(await ok("kubectl get machines -o json")) as {
        items: (MachineView & { metadata: { name: string } })[];
      };
      return Object.fromEntries(j.items.map((m) => [m.metadata.name, m]));
    };
    const cluster = async (): Promise<ClusterView> =>
      JSON.parse(await ok(`kubectl get cluster ${LAB_CLUSTER} -o json`)) as ClusterView;
    const progressing = (c: ClusterView) =>
      c.status?.conditions?.find((x) => x.type === "Progressing");
    /** Catalogs a release (from `liken release catalog-entry`'s digest) and targets it. */
    const target = async (version: string, digest: string): Promise<void> => {
      const c = JSON.parse(await ok(`kubectl get cluster ${LAB_CLUSTER} -o json`)) as {
        spec: { releases: { catalog: { version: string; digest: string }[] } };
      };
      const catalog = [
        ...c.spec.releases.catalog.filter((e) => e.version !== version),
        { version, digest },
      ];
      const patch = JSON.stringify({ spec: { version, releases: { catalog } } });
      await ok(`kubectl patch cluster ${LAB_CLUSTER} --type merge -p '${patch}'`);
    };
    const [current, next] = LAB_VERSIONS;
    const channel = /liken release catalog-entry (\S+) /.exec(
      printed(commands, "liken release catalog-entry"),
    )![1]!;
    const entry = await ok(`liken release catalog-entry ${channel} ${next}`);
    const nextDigest = /digest: (sha256:[0-9a-f]{64})/.exec(entry)![1]!;

    // The printed window, closed now; then the next release targeted.
    await ok(printed(commands, `kubectl patch cluster ${LAB_CLUSTER} --type merge`));
    await target(next, nextDigest);
    const staged = await until(
      "every machine staged the release, none granted a turn, OutsideMaintenanceWindow",
      async () => {
        const [ms, c] = await Promise.all([machines(), cluster()]);
        const all = Object.values(ms);
        const waiting = all.filter(
          (m) =>
            m.status?.staged?.version === next &&
            m.status.step === (m.spec.rebootPolicy === "Auto" ? "UpdatePending" : "RebootPending"),
        );
        return waiting.length === all.length &&
          progressing(c)?.reason === "OutsideMaintenanceWindow"
          ? { ms, c }
          : undefined;
      },
      300_000,
    );
    expect(Object.keys(staged.ms)).toHaveLength(5);
    expect(staged.c.status?.rebootTurns ?? []).toEqual([]);
    expect(progressing(staged.c)?.message).toMatch(
      /the next opens \S+ \d\d:\d\d UTC \(\S+Z\) for 1h/,
    );
    expect(await ok("kubectl get clusters")).toMatch(/\bOutsideMaintenanceWindow\b/);
    // No turn was ever granted while it was closed: the Events say so, and nobody rebooted.
    expect(
      await ok(
        `kubectl get events -n default --field-selector involvedObject.name=${LAB_CLUSTER},reason=TurnGranted -o name`,
      ),
    ).toBe("");
    expect(Object.values(await machines()).every((m) => m.status?.version === current)).toBe(true);

    // Opened (the printed removal): the Auto machines take their turns.
    await ok(printed(commands, `kubectl patch cluster ${LAB_CLUSTER} --type json`));
    await until(
      "the Auto machines on the release once the window is open",
      async () => {
        const ms = Object.values(await machines()).filter((m) => m.spec.rebootPolicy === "Auto");
        return ms.every((m) => m.status?.version === next && m.status.step === "Ready");
      },
      300_000,
    );

    // A bad release, published as printed, catalogued and targeted.
    const published = await ok(printed(commands, "npm run -s lab -- bad-release"));
    expect(published).toContain(`published ${BAD} (`);
    const badDigest = /\((sha256:[0-9a-f]{64})\)/.exec(published)![1]!;
    await target(BAD, badDigest);
    const held = await until(
      "ReleaseFailed after one trial, the other machines keeping it staged",
      async () => {
        const [ms, c] = await Promise.all([machines(), cluster()]);
        const tried = Object.entries(ms).filter(([, m]) => m.status?.lastTrial?.version === BAD);
        const stagedBad = Object.values(ms).filter((m) => m.status?.staged?.version === BAD);
        return progressing(c)?.reason === "ReleaseFailed" &&
          tried.length === 1 &&
          stagedBad.length === 4
          ? { ms, c, tried }
          : undefined;
      },
      300_000,
    );
    const [name, failed] = held.tried[0]!;
    expect(failed.status?.lastTrial).toMatchObject({
      version: BAD,
      result: "Failed",
      reason: "TrialFellBack",
    });
    expect(failed.status?.version).toBe(next);
    expect(held.c.status?.rebootTurns ?? []).toEqual([]);
    expect(progressing(held.c)?.message).toContain(`${name} (TrialFellBack`);
    expect(await ok("kubectl get clusters")).toMatch(/\bReleaseFailed\b/);
    expect(await ok(`liken status ${LAB_CLUSTER} --once`)).toContain("ReleaseFailed");
    // Exactly one: no other machine tried it or failed it.
    const others = Object.entries(await machines()).filter(([n]) => n !== name);
    expect(
      others.filter(([, m]) => m.status?.failedReleases?.some((f) => f.version === BAD)),
    ).toEqual([]);
    expect(others.filter(([, m]) => m.status?.lastTrial?.version === BAD)).toEqual([]);

    const exited = new Promise((r) => lab.once("exit", r));
    process.kill(-lab.pid!, "SIGINT");
    await exited;
  });
});
