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
import { execFile } from "node:child_process";
import { copyFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../api/client.js";
import { loadKubeConfig } from "../api/kubeconfig.js";
import { ANNOTATION_CHECK_RELEASES, type RequireEvidence } from "../api/types.js";
import { likenEntry } from "../cli/entry.js";
import { down, up, type ControlPlaneState } from "../controlplane/instance.js";
import { LikenError } from "../errors.js";
import { EVICTION_PATH } from "../operator/webhook/names.js";
import { followPatch } from "./follow.js";
import { addRelease, initChannel } from "../release/tuf.js";
import { until } from "./demo.js";
import {
  bootstrapKubeconfig,
  createCluster,
  createMachine,
  createNode,
  type LabMachineSpec,
} from "./fleet.js";
import { installApi, LAB_CLUSTER, LAB_SIGNING_DURATION_SECONDS, type Lab } from "./lab.js";
import { RolloutObserver } from "./observer.js";
import { LAB_DIR, LAB_RING_KUBECONFIG, LAB_RING_PLANE } from "./paths.js";
import {
  type FleetOperatorOptions,
  operatorKubeconfig,
  powerOn,
  prepareMachines,
  startOperator,
  waitForReports,
} from "./processes.js";
import { buildLabRelease, type LabRelease } from "./releases.js";
import { startWebhookService } from "./webhook-service.js";

const run = promisify(execFile);

/** The bad release: its kernel panics on its trial boot (releases.ts, "panic"). */
export const RINGS_BAD_VERSION = "2026.10.13-001";
export const RING_NAMES = ["canary", "early", "stable"] as const;
export type RingName = (typeof RING_NAMES)[number];
/** The rings' Clusters: canary is the lab's own. */
export const RING_CLUSTERS: Readonly<Record<RingName, string>> = {
  canary: LAB_CLUSTER,
  early: "early",
  stable: "stable",
};

/** Everything, three rollouts and a failed trial, fits well within this on 2 busy cores. */
const RINGS_DEADLINE_MS = 12 * 60_000;
/** One step (a ring's rollout, the failed trial): about 20 s each on 2 cores at load 20. */
const STEP_DEADLINE_MS = 3 * 60_000;
/** How long each counted cluster must have run a release without a revert (`--soak`). */
const SOAK_SECONDS = 3;
const SOAK = `${SOAK_SECONDS}s`;
/** What the followers require of the signed evidence: the ring before's, promoted. */
const REQUIRE: RequireEvidence = { clusters: 1, machines: 1 };

/** One ring as the scene runs it. */
interface Ring {
  name: RingName;
  cluster: string;
  /** Where its Cluster is: "lab" (the lab's control plane) or LAB_RING_PLANE. */
  plane: string;
  api: LikenApi;
  machines: string[];
  observer: RolloutObserver;
}

/** What the scene measured, printed as one JSON line for the e2e test and people alike. */
export interface RingsFigures {
  good: string;
  bad: string;
  /** Per ring: when (s from the scene's start) the first and the last machine ran `good`. */
  rings: Record<
    RingName,
    { cluster: string; plane: string; machines: number; first?: number; all?: number }
  >;
  /** The refusal of the bad release by `liken promote`, its first line. */
  refused: string;
  /** Versions each ring's machines ran, in the order seen. */
  ran: Record<RingName, string[]>;
  seconds: number;
}

/** A control plane of its own for the early ring, with liken's API installed. */
async function secondPlane(lab: Lab): Promise<ControlPlaneState> {
  const cp = await up({
    name: LAB_RING_PLANE,
    signingDurationSeconds: LAB_SIGNING_DURATION_SECONDS,
  });
  lab.stoppers.push(async () => void (await down(LAB_RING_PLANE)));
  copyFileSync(cp.kubeconfig, LAB_RING_KUBECONFIG);
  await installApi(lab.binDir, cp.kubeconfig);
  return cp;
}

/** The Node and the Machine of each spec, for `cluster`. */
async function objects(kc: KubeConfig, api: LikenApi, cluster: string, specs: LabMachineSpec[]) {
  for (const m of specs) {
    await createNode(kc, m.name);
    await createMachine(api, cluster, m);
  }
}

const worker = (name: string): LabMachineSpec => ({
  name,
  role: "Worker",
  rebootPolicy: "Auto",
});

/**
 * A ServiceAccount that may only read Clusters (docs/rings.md, "Read-only credentials"), and
 * its token: what `liken promote` reads a ring with.
 */
async function readerToken(lab: Lab, kubeconfig: string): Promise<string> {
  const kubectl = (args: string[], input?: string) =>
    new Promise<string>((resolve, reject) => {
      const child = execFile(
        path.join(lab.binDir, "kubectl"),
        args,
        { env: { ...process.env, KUBECONFIG: kubeconfig } },
        (e, stdout, stderr) =>
          e ? reject(new Error(`kubectl ${args.join(" ")}: ${stderr}`)) : resolve(stdout),
      );
      if (input !== undefined) child.stdin?.end(input);
    });
  await kubectl(
    ["apply", "-f", "-"],
    `apiVersion: v1
kind: ServiceAccount
metadata: {name: liken-promote-reader, namespace: liken-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: liken-promote-reader}
rules:
  - apiGroups: [liken.sh]
    resources: [clusters]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: liken-promote-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: liken-promote-reader}
subjects: [{kind: ServiceAccount, name: liken-promote-reader, namespace: liken-system}]
`,
  );
  return (
    await kubectl([
      "create",
      "token",
      "liken-promote-reader",
      "-n",
      "liken-system",
      "--duration=2h",
    ])
  ).trim();
}

/** One kubeconfig with a read-only context per ring that is promoted from (canary, early). */
async function readerKubeconfig(
  lab: Lab,
  planes: Partial<Record<"canary" | "early", ControlPlaneState>>,
): Promise<string> {
  const kc = new KubeConfig();
  const clusters = [];
  const users = [];
  const contexts = [];
  for (const [ring, cp] of Object.entries(planes)) {
    clusters.push({ name: ring, server: cp.server, caFile: cp.certs.caCert });
    users.push({ name: `${ring}-reader`, token: await readerToken(lab, cp.kubeconfig) });
    contexts.push({ name: ring, cluster: ring, user: `${ring}-reader` });
  }
  kc.loadFromOptions({ clusters, users, contexts, currentContext: "canary" });
  const file = path.join(LAB_DIR, "lab", "rings.kubeconfig"); // rewritten as rings join
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/** `liken promote`, the real command; its output, and whether it signed. */
async function promoteCli(args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const r = await run(process.execPath, [likenEntry(), "promote", ...args]);
    return { ok: true, out: `${r.stdout}${r.stderr}`.trim() };
  } catch (e) {
    const x = e as { stdout?: string; stderr?: string };
    return { ok: false, out: `${x.stdout ?? ""}${x.stderr ?? ""}`.trim() };
  }
}

/**
 * The early ring on a control plane of its own (its Cluster, its machine, its own
 * cluster-operator) and the stable ring's Cluster and machine beside the lab's: everything
 * on the factory release, machines joined.
 */
async function placeRings(
  lab: Lab,
  first: LabRelease,
  operatorOptions: FleetOperatorOptions,
): Promise<{ cp2: ControlPlaneState; api2: LikenApi }> {
  const work = path.join(LAB_DIR, "lab");
  const cp2 = await secondPlane(lab);
  const kc2 = loadKubeConfig(cp2.kubeconfig);
  const api2 = new LikenApi(kc2, "liken-lab");
  const earlyMachines = [worker("early-1")];
  const stableMachines = [worker("stable-1")];
  await createCluster(api2, RING_CLUSTERS.early, lab.channel.url, first);
  await objects(kc2, api2, RING_CLUSTERS.early, earlyMachines);
  await createCluster(lab.api, RING_CLUSTERS.stable, lab.channel.url, first);
  await objects(lab.kubeConfig, lab.api, RING_CLUSTERS.stable, stableMachines);
  const early = await prepareMachines(
    {
      controlPlane: cp2,
      cluster: RING_CLUSTERS.early,
      bootstrap: await bootstrapKubeconfig(cp2, kc2, path.join(work, "bootstrap-early.kubeconfig")),
    },
    earlyMachines,
    lab.channel.url,
    first,
  );
  const stable = await prepareMachines(
    {
      controlPlane: lab.controlPlane,
      cluster: RING_CLUSTERS.stable,
      bootstrap: path.join(work, "bootstrap.kubeconfig"),
    },
    stableMachines,
    lab.channel.url,
    first,
  );
  // The early ring's own cluster-operator (one copy), then its machine; stable's machine is
  // served by the lab's operators, which reconcile every Cluster on their control plane. The
  // early operator grants no turn for its start grace (40 s, or the lab's --start-grace): the
  // scene starts it first.
  const service = await startWebhookService(1);
  lab.stoppers.push(() => service.close());
  startOperator(
    lab,
    await operatorKubeconfig(
      { binDir: lab.binDir, controlPlane: cp2 },
      path.join(work, "operator-early.kubeconfig"),
    ),
    "operator-early",
    { port: service.backends[0]!, url: `https://127.0.0.1:${service.port}${EVICTION_PATH}` },
    {
      logFile: path.join(work, "operator-early.log"),
      ...(operatorOptions.startGraceSeconds === undefined
        ? {}
        : { startGraceSeconds: operatorOptions.startGraceSeconds }),
    },
  );
  powerOn(lab, [...early, ...stable]);
  await waitForReports(api2, ["early-1"], first.version);
  await waitForReports(lab.api, ["stable-1"], first.version);
  return { cp2, api2 };
}

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

function timesOf(r: Ring, version: string, started: number): RingsFigures["rings"][RingName] {
  const to = r.observer.changes.filter((c) => c.to === version);
  const s = (t: number): number => Math.round((t - started) / 100) / 10;
  const firsts = r.machines.map((m) => to.find((c) => c.machine === m)?.at);
  const seen = firsts.filter((t): t is number => t !== undefined);
  return {
    cluster: r.cluster,
    plane: r.plane,
    machines: r.machines.length,
    ...(seen.length === 0 ? {} : { first: s(Math.min(...seen)) }),
    ...(seen.length === r.machines.length ? { all: s(Math.max(...seen)) } : {}),
  };
}

/** The versions a ring's machines ran, in the order seen, from the factory one on. */
function ranOf(r: Ring, from: string): string[] {
  const out = [from];
  for (const c of r.observer.changes) if (c.to !== undefined && !out.includes(c.to)) out.push(c.to);
  return out;
}

/** What each ring ran, and when: one line per machine change the observers saw. */
function observerLines(rings: readonly Ring[], started: number): string {
  const lines = ["lab: what each ring ran, and when (seconds from the scene's start):"];
  for (const r of rings) {
    lines.push(
      `  ${r.name} (Cluster ${r.cluster} on control plane ${r.plane}, ${r.machines.length} machine(s)):`,
    );
    if (r.observer.changes.length === 0) lines.push("    no machine changed release");
    for (const c of r.observer.changes)
      lines.push(
        `    +${((c.at - started) / 1000).toFixed(1)} s ${c.machine}: ${c.from ?? "-"} -> ${c.to ?? "-"}`,
      );
  }
  return lines.join("\n");
}
