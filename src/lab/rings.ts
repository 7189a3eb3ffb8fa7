// `npm run lab -- --rings`: three rings of clusters promote a release on signed evidence
// (docs/rings.md). canary: the lab's own Cluster and machines; early: a Cluster on a control
// plane of its own, with its own cluster-operator and machine; stable: a Cluster beside the
// lab's on the lab's control plane, with its own machine. Each follows its signed channel. The
// scene, scripted:
//   1. the channel is signed; the release the machines were made with goes into canary, and
//      `liken promote` carries it to early and stable on what the ring before shows (both
//      require evidence), while the early ring's control plane comes up;
//   2. a good release is published into canary: canary rolls, `liken promote` signs it into
//      early with canary's evidence, early rolls, `liken promote` signs it into stable;
//   3. meanwhile a release whose kernel panics is published into canary: its first trial fails,
//      canary holds (ReleaseFailed), and `liken promote` refuses it with the reason;
// and the observers print what each ring ran, and when. Every `liken promote` is the real
// command, through read-only contexts (one per ring promoted from, on its control plane).
// Lean by design (it runs in the e2e tier): two machines in canary, one in each later ring.
//
// Its pieces: the rings and what is reported of them (ring.ts), the later rings' places
// (ring-places.ts), `liken promote` through read-only contexts (ring-promote.ts); here, the
// scene's script.
import path from "node:path";
import type { LikenApi } from "../api/client.js";
import { ANNOTATION_CHECK_RELEASES, type RequireEvidence } from "../api/types.js";
import { LikenError } from "../errors.js";
import { followPatch } from "./follow.js";
import { addRelease, initChannel } from "../release/tuf.js";
import { until } from "./demo.js";
import type { Lab } from "./lab.js";
import { RolloutObserver } from "./observer.js";
import { LAB_DIR, LAB_RING_PLANE } from "./paths.js";
import type { FleetOperatorOptions } from "./processes.js";
import { buildLabRelease } from "./releases.js";
import {
  observerLines,
  ranOf,
  RING_CLUSTERS,
  timesOf,
  type Ring,
  type RingName,
  type RingsFigures,
} from "./ring.js";
import { placeRings } from "./ring-places.js";
import { promoteCli, readerKubeconfig } from "./ring-promote.js";

export { RING_CLUSTERS, RING_NAMES, type RingName, type RingsFigures } from "./ring.js";

/** The bad release: its kernel panics on its trial boot (releases.ts, "panic"). */
export const RINGS_BAD_VERSION = "2026.10.13-001";

/** Everything, three rollouts and a failed trial, fits well within this on 2 busy cores. */
const RINGS_DEADLINE_MS = 12 * 60_000;
/** One step (a ring's rollout, the failed trial): about 20 s each on 2 cores at load 20. */
const STEP_DEADLINE_MS = 3 * 60_000;
/** How long each counted cluster must have run a release without a revert (`--soak`). */
const SOAK_SECONDS = 3;
const SOAK = `${SOAK_SECONDS}s`;
/** What the followers require of the signed evidence: the ring before's, promoted. */
const REQUIRE: RequireEvidence = { clusters: 1, machines: 1 };

export async function runRings(
  lab: Lab,
  log: (l: string) => void,
  /** The early ring's operator takes the lab's --start-grace, as the lab's own copies do. */
  operatorOptions: FleetOperatorOptions = {},
): Promise<string> {
  const started = Date.now();
  const end = started + RINGS_DEADLINE_MS;
  /** Each wait's: a stalled step is told within minutes, not at the end of the whole. */
  const deadline = (): number => Math.min(end, Date.now() + STEP_DEADLINE_MS);
  const at = (): number => Math.round((Date.now() - started) / 100) / 10;
  const say = (l: string): void => log(`rings +${at().toFixed(1)} s: ${l}`);
  const [first, good] = lab.releases;
  if (first === undefined || good === undefined) throw new Error("the lab has two releases");
  const work = path.join(LAB_DIR, "lab");
  const repo = lab.channelDir;
  const keys = path.join(work, "keys");
  const rings: Partial<Record<RingName, Ring>> = {};
  const ring = async (name: RingName, plane: string, api: LikenApi, machines: string[]) => {
    const cluster = RING_CLUSTERS[name];
    const r = { name, cluster, plane, api, machines, observer: new RolloutObserver(api, cluster) };
    rings[name] = r;
    await r.observer.start();
    return r;
  };
  try {
    return await scene();
  } finally {
    for (const r of Object.values(rings)) r.observer.stop();
  }

  async function scene(): Promise<string> {
    if (first === undefined || good === undefined) throw new Error("the lab has two releases");
    // The later rings' places come up while canary works: the early ring's control plane and
    // operator take the longest (its start grace), and nothing of canary's waits on them.
    say(
      `a control plane of its own for the early ring (${LAB_RING_PLANE}), a Cluster beside lab for stable`,
    );
    const placed = placeRings(lab, first, operatorOptions);
    placed.catch(() => undefined); // awaited below; a failure is thrown there
    const canary = await ring(
      "canary",
      "lab",
      lab.api,
      lab.fleet.map((m) => m.name),
    );
    const check = (r: Ring) =>
      r.api.clusters.patch(r.cluster, {
        metadata: { annotations: { [ANNOTATION_CHECK_RELEASES]: new Date().toISOString() } },
      });
    const clusterOf = (r: Ring) => r.observer.current().cluster;
    const target = (r: Ring) => clusterOf(r)?.status?.trust?.target?.version;
    let kubeconfig = await readerKubeconfig(lab, { canary: lab.controlPlane });
    const promote = async (from: Ring, to: RingName, version: string) => {
      const machines = from.machines.length;
      const args = [
        ...["--repo", repo, "--keys", keys, "--from", from.name, "--to", to],
        ...["--version", version, "--kubeconfig", kubeconfig],
        ...["--context", `${from.name}/${from.cluster}`],
        ...["--min-clusters", "1", "--min-machines", String(machines)],
        ...["--max-failed-trials", "0", "--soak", SOAK],
      ];
      say(
        `liken promote --from ${from.name} --to ${to} --version ${version} --context ${from.name}/${from.cluster} --min-machines ${machines} --soak ${SOAK}`,
      );
      return promoteCli(args);
    };
    const signed = async (from: Ring, to: RingName, version: string) => {
      const r = await promote(from, to, version);
      for (const l of r.out.split("\n")) say(`  ${l}`);
      if (!r.ok)
        throw new LikenError(
          "LIKEN_LAB_RINGS",
          `liken promote refused ${version} from ${from.name}: ${r.out}`,
        );
    };
    /** The ring's machines all run `version` Ready, the Cluster Ready, and its evidence soaked. */
    /** `soaked`: long enough for `liken promote --soak` too (the last ring is promoted from by none). */
    const proven = (r: Ring, version: string, soaked = true) =>
      stalled(r, proving(r, version, soaked));
    /** A stalled wait says where the ring's Cluster stands (its Progressing condition). */
    const stalled = <T>(r: Ring, p: Promise<T>): Promise<T> =>
      p.catch((e: unknown) => {
        const c = clusterOf(r)?.status?.conditions?.find((x) => x.type === "Progressing");
        throw new LikenError(
          "LIKEN_LAB_RINGS",
          `${(e as Error).message}; Cluster ${r.cluster} Progressing ${c === undefined ? "not yet written" : `${c.reason}: ${c.message}`}`,
          { cause: e },
        );
      });
    const proving = (r: Ring, version: string, soaked: boolean) =>
      until(`ring ${r.name} proves ${version}`, deadline(), async () => {
        const { cluster, machines } = r.observer.current();
        const ready = machines.filter(
          (m) => m.status?.version === version && m.status.step === "Ready",
        );
        const e = cluster?.status?.evidence?.find((x) => x.version === version);
        const since = e?.firstProvenAt === undefined ? undefined : Date.parse(e.firstProvenAt);
        return cluster?.status?.phase === "Ready" &&
          ready.length === r.machines.length &&
          e?.provenMachines === r.machines.length &&
          since !== undefined &&
          // firstProvenAt has whole seconds: one more, so that promote reads the soak.
          (!soaked || Date.now() - since > (SOAK_SECONDS + 1) * 1000)
          ? true
          : undefined;
      });
    const follow = async (r: Ring, rootDigest: string, require?: RequireEvidence) => {
      await r.api.clusters.patch(
        r.cluster,
        followPatch(r.name, rootDigest, require === undefined ? {} : { requireEvidence: require }),
      );
      await check(r);
      await until(`${r.name} follows ${first.version}`, deadline(), async () =>
        target(r) === first.version ? true : undefined,
      );
    };

    // 1. Sign the channel; the factory release earns its way through the rings too.
    const { rootDigest } = await initChannel({ repo, keys });
    await addRelease({ repo, keys, channel: "canary", version: first.version });
    say(`liken release sign init; sign add --channel canary --version ${first.version}`);
    await follow(canary, rootDigest);
    await proven(canary, first.version);
    await signed(canary, "early", first.version);

    // 2. A good release into canary: it rolls while the later rings come up.
    await addRelease({ repo, keys, channel: "canary", version: good.version });
    say(`liken release sign add --channel canary --version ${good.version}`);
    await check(canary);

    const { cp2, api2 } = await placed;
    say(`early-1 (on ${LAB_RING_PLANE}) and stable-1 (on lab) joined, running ${first.version}`);
    const early = await ring("early", LAB_RING_PLANE, api2, ["early-1"]);
    const stable = await ring("stable", "lab", lab.api, ["stable-1"]);
    kubeconfig = await readerKubeconfig(lab, { canary: lab.controlPlane, early: cp2 });
    await follow(early, rootDigest, REQUIRE);
    await proven(early, first.version);
    await signed(early, "stable", first.version);
    await follow(stable, rootDigest, REQUIRE);
    say(
      `every ring follows its signed channel on ${first.version} (early, stable: requireEvidence ${JSON.stringify(REQUIRE)})`,
    );
    // Built only now: the lab's build also announces it in its plain channel.yaml, which a
    // Cluster reads (AVAILABLE) until it follows a signed channel; now every ring does.
    const badBuilt = buildLabRelease(repo, work, RINGS_BAD_VERSION, "panic");
    badBuilt.catch(() => undefined);

    // The good release: canary proved it, early takes it on canary's evidence.
    await proven(canary, good.version);
    say(`canary proved ${good.version}: ${canary.machines.length} machine(s)`);
    await signed(canary, "early", good.version);
    await check(early);

    // 3. A bad release in canary, while early rolls the good one.
    const bad = await badBuilt;
    await addRelease({ repo, keys, channel: "canary", version: bad.version });
    say(
      `liken release sign add --channel canary --version ${bad.version} (its kernel panics on its trial boot)`,
    );
    await check(canary);

    await proven(early, good.version);
    say(`early proved ${good.version}`);
    await signed(early, "stable", good.version);
    await check(stable);

    const held = await until(
      `canary holds ${bad.version} (ReleaseFailed)`,
      deadline(),
      async () => {
        const c = clusterOf(canary);
        const p = c?.status?.conditions?.find((x) => x.type === "Progressing");
        const e = c?.status?.evidence?.find((x) => x.version === bad.version);
        return p?.reason === "ReleaseFailed" && (e?.failedTrials ?? 0) > 0 ? p : undefined;
      },
    );
    say(`canary holds ${bad.version}: ${held.reason}: ${held.message}`);
    const refusal = await promote(canary, "early", bad.version);
    for (const l of refusal.out.split("\n")) say(`  ${l}`);
    if (refusal.ok)
      throw new LikenError(
        "LIKEN_LAB_RINGS",
        `liken promote signed ${bad.version}, which failed its trial: ${refusal.out}`,
      );

    await proven(stable, good.version, false);
    say(`stable proved ${good.version}`);
    // The later rings never took the bad release: not in their channel, not their target.
    for (const r of [early, stable]) {
      const c = clusterOf(r);
      if (c?.status?.available === bad.version || target(r) === bad.version)
        throw new LikenError("LIKEN_LAB_RINGS", `ring ${r.name} saw ${bad.version}`);
    }
    const all = [canary, early, stable];
    const figures: RingsFigures = {
      good: good.version,
      bad: bad.version,
      rings: Object.fromEntries(
        all.map((r) => [r.name, timesOf(r, good.version, started)]),
      ) as RingsFigures["rings"],
      refused: refusal.out.split("\n").find((l) => l.trim() !== "") ?? "",
      ran: Object.fromEntries(
        all.map((r) => [r.name, ranOf(r, first.version)]),
      ) as RingsFigures["ran"],
      seconds: at(),
    };
    return `${observerLines(all, started)}\nlab: rings: ${JSON.stringify(figures)}`;
  }
}
