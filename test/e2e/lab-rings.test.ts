// Issue 41's scene, end to end on this clone: `npm run lab -- --rings` runs three rings of
// clusters (canary: the lab's Cluster; early: a Cluster on a control plane of its own; stable: a
// Cluster beside the lab's), each following its signed channel. Watched from outside with
// `kubectl get clusters,machines -w` against BOTH API servers: the good release reaches canary,
// then early, then stable, each step signed by `liken promote` with the ring before's evidence
// (the followers' status shows it); the bad release fails its trial in canary, `liken promote`
// refuses it with the reason, and no object of the later rings ever names it.
import { existsSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { LAB_VERSIONS } from "../../src/lab/lab.js";
import { LAB_RING_KUBECONFIG } from "../../src/lab/paths.js";
import { labProcesses } from "../../src/lab/reap.js";
import { RINGS_BAD_VERSION, type RingsFigures } from "../../src/lab/rings.js";
import { runLab, stopLabs } from "./lab-support.js";

interface Obj {
  kind: string;
  metadata: { name: string };
  spec: { cluster?: string };
  status?: {
    version?: string;
    available?: string;
    trust?: {
      target?: { version: string };
      newest?: { version: string };
      evidence?: { from: string; clusters: number; machines: number };
    };
    evidence?: { version: string; provenMachines: number; failedTrials: number }[];
    conditions?: { type: string; reason: string; status: string }[];
  };
}

/** What kubectl printed, each object with when it was seen and on which control plane. */
interface Seen {
  plane: "lab" | "early";
  at: number;
  o: Obj;
}

afterAll(stopLabs);

const [FIRST, GOOD] = LAB_VERSIONS;
const BAD = RINGS_BAD_VERSION;

describe("npm run lab -- --rings", () => {
  it("a good release earns its way canary -> early -> stable on signed evidence; a bad one never leaves canary", async () => {
    const started = Date.now();
    const seen: Seen[] = [];
    const on = (plane: Seen["plane"]) => (o: Obj) => seen.push({ plane, at: Date.now(), o });
    const { code, stdout, stderr } = await runLab(
      ["--rings"],
      [
        { kind: "clusters", onObject: on("lab") },
        { kind: "machines", onObject: on("lab") },
        { kind: "clusters", onObject: on("early"), kubeconfig: LAB_RING_KUBECONFIG },
        { kind: "machines", onObject: on("early"), kubeconfig: LAB_RING_KUBECONFIG },
      ],
    );
    const out = stderr.slice(-6000) + stdout;
    expect(code, out).toBe(0);
    const line = /lab: rings: (\{.*\})\n/.exec(stdout);
    expect(line, out).not.toBeNull();
    const f = JSON.parse(line![1]!) as RingsFigures;

    // The lab's own account: the good release reached every ring, in ring order.
    expect(f.good).toBe(GOOD);
    for (const r of ["canary", "early", "stable"] as const)
      expect(f.ran[r], `what ring ${r} ran`).toEqual([FIRST, GOOD]);
    expect(f.rings.early.plane).toBe("lab-early");
    expect(f.rings.canary.all!).toBeLessThan(f.rings.early.first!);
    expect(f.rings.early.all!).toBeLessThan(f.rings.stable.first!);
    // liken promote refused the bad release, with the reason, and signed nothing.
    expect(out).toContain(`liken: ${BAD} (`);
    expect(out).toContain(
      `1 failed trial(s) of ${BAD} in the ring (context canary, Cluster lab: 1)`,
    );
    expect(out).toMatch(/nothing was signed \[LIKEN_PROMOTE_EVIDENCE_SHORT\]/);
    expect(out).toMatch(/lab: what each ring ran, and when/);

    // From outside, on both API servers.
    const of = (plane: Seen["plane"], kind: string, name: string) =>
      seen.filter((s) => s.plane === plane && s.o.kind === kind && s.o.metadata.name === name);
    const onGood = (plane: Seen["plane"], machine: string) =>
      of(plane, "Machine", machine).find((s) => s.o.status?.version === GOOD)?.at;
    const canaryAt = Math.max(onGood("lab", "node-1") ?? Infinity, onGood("lab", "node-2") ?? 0);
    const earlyAt = onGood("early", "early-1");
    const stableAt = onGood("lab", "stable-1");
    expect(earlyAt, "kubectl saw early-1 on the good release").toBeDefined();
    expect(stableAt, "kubectl saw stable-1 on the good release").toBeDefined();
    expect(canaryAt).toBeLessThan(earlyAt!);
    expect(earlyAt!).toBeLessThan(stableAt!);
    // Each later ring took it on signed evidence from the ring before (status.trust.evidence).
    const lastOf = (plane: Seen["plane"], name: string) => of(plane, "Cluster", name).at(-1)?.o;
    expect(lastOf("early", "early")?.status?.trust).toMatchObject({
      target: { version: GOOD },
      evidence: { from: "canary", clusters: 1, machines: 2 },
    });
    expect(lastOf("lab", "stable")?.status?.trust).toMatchObject({
      target: { version: GOOD },
      evidence: { from: "early", clusters: 1, machines: 1 },
    });
    // The bad release failed its trial in canary, which held (ReleaseFailed) and recorded it.
    const canary = of("lab", "Cluster", "lab").map((s) => s.o);
    expect(
      canary.some((c) =>
        c.status?.conditions?.some((x) => x.type === "Progressing" && x.reason === "ReleaseFailed"),
      ),
      "kubectl saw the canary Cluster read ReleaseFailed",
    ).toBe(true);
    expect(
      canary.at(-1)?.status?.evidence?.find((e) => e.version === BAD)?.failedTrials,
    ).toBeGreaterThan(0);
    // No object of the later rings ever named it: not their channel, not a target, not a
    // machine. Only the raw signed metadata each follower keeps (status.trust.metadata: the one
    // targets file of the repository lists every channel's releases, canary's too) may.
    const later = seen.filter(
      (s) =>
        s.plane === "early" ||
        (s.o.kind === "Cluster" && s.o.metadata.name === "stable") ||
        (s.o.kind === "Machine" && s.o.spec.cluster === "stable"),
    );
    expect(later.length).toBeGreaterThan(0);
    const withoutMetadata = (o: Obj): string =>
      JSON.stringify(o, (k, v: unknown) =>
        k === "metadata" && typeof v === "object" && v !== null && "targets" in v ? undefined : v,
      );
    const named = later.filter((s) => withoutMetadata(s.o).includes(BAD));
    expect(
      named.map((s) => {
        const text = withoutMetadata(s.o);
        const i = text.indexOf(BAD);
        return `${s.plane}/${s.o.kind}/${s.o.metadata.name}: ...${text.slice(Math.max(0, i - 300), i + 60)}`;
      }),
    ).toEqual([]);

    // Nothing the lab started is left: neither control plane, nor any agent or operator.
    expect(existsSync(LAB_RING_KUBECONFIG)).toBe(false);
    expect(labProcesses()).toEqual([]);
    console.log(
      `lab --rings: ${((Date.now() - started) / 1000).toFixed(0)} s in all, the scene ${f.seconds} s ` +
        `(canary ${f.rings.canary.all} s, early ${f.rings.early.all} s, stable ${f.rings.stable.all} s)`,
    );
  });
});
