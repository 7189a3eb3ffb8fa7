// Injects one run's fault schedule into the lab's real processes: only processes this run
// started (the fleet's agents and operator copies, the lab's kube-apiserver), by pid.
import { closeSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Machine, MachineStep, ReleaseRef, RevertPolicy } from "../api/types.js";
import type { Observation } from "../invariants/index.js";
import type { TortureViolation } from "./violation.js";
import type { Lab } from "../lab/lab.js";
import type { Fleet } from "../lab/processes.js";
import { LAB_CLUSTER, LAB_RUN_DIR } from "../lab/paths.js";
import type { LabRelease } from "../lab/releases.js";
import { describeFault, type CutWhen, type TortureFault } from "./schedule.js";
import { imageOf, respawn, signal } from "./respawn.js";
import type { Relay } from "./relay.js";
import { rotateAway } from "./ca-rotation.js";
import { readHeld } from "../agent/identity/files.js";
import type { SignedChannel } from "./channel.js";
import { RECALL_SLACK_MS, showsRecall, type RecallMark, type Stall } from "./recall-rules.js";

export interface FaultTargets {
  lab: Lab;
  fleet: Fleet;
  /** Each machine's relay to the API server. */
  relays: Map<string, Relay>;
  /** A machine's step as the watcher last saw it. */
  stepOf: (machine: string) => MachineStep | undefined;
  /** What the runner itself did that the checker must know (power cuts, operator starts). */
  record: (o: Observation) => void;
  log: (line: string) => void;
  /**
   * Built before the target is set: a newer good release (retarget), one that panics (its
   * revertFloor the lab's first release), and the fix a publisher ships after a recall.
   */
  releases: { next: LabRelease; bad: LabRelease; fix: LabRelease };
  /** The good target the fleet must end on: a retarget, a recall's fix move it. */
  target: LabRelease;
  /** Set when the Cluster follows the signed channel (a run that drew a recall). */
  channel?: { signed: SignedChannel; intervalMs: number };
  /** How long a revert has to bring every machine back (the run's convergence time). */
  revertEndMs: number;
}

export type { TortureViolation } from "./violation.js";

/** How a bad release is made the target and how the run moves past it (FaultInjector.badRelease). */
interface BadWay {
  /** How the violation says it was the target: "was the target", "was published …". */
  was: string;
  /** How the fault's line says it was stopped. */
  stopped: string;
  start: () => Promise<void>;
  /** Once the fleet stopped it (or the time ran out); what it says, or "". */
  afterStop: () => Promise<string>;
  /** A good target again; what it says. */
  end: () => Promise<string>;
}

/** How often a bad release's fault reads the Cluster to see whether the fleet stopped it. */
const STOPPED_POLL_MS = 500;

/**
 * How long a machine whose CA rotated has to rejoin: 3 refused answers over at least 10 s
 * (src/agent/identity/refusals.ts), the approver's round (2 s), the status write; with room for
 * a paused leader's lease (15 s) and an etcd restart drawn at the same time.
 */
const CA_ROTATED_REJOIN_MS = 120_000;
/** The bad release's revert threshold: its first failed machine reverts the fleet. */
const BAD_MAX_FAILURES = 1;
/** How long setting the target is tried again while the API server is busy or starting. */
const SET_TARGET_RETRY_MS = 30_000;
/** A lapse's cut lasts this long past the certificate's end: the agent's clock has seen it. */
const LAPSE_MARGIN_MS = 3_000;

/** How often a power cut waiting for its step looks again: well under a download's length. */
const STEP_POLL_MS = 100;
/** How often it reads the agent's log again: a read-back of the lab's slots takes ~100 ms. */
const LOG_POLL_MS = 10;

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/**
 * Whether a line of the log after byte `from` begins the phase `marker` names; `next`: where
 * the complete lines read end (the next look starts there).
 */
function saidSince(file: string, from: number, marker: string): { said: boolean; next: number } {
  const size = sizeOf(file);
  if (size <= from) return { said: false, next: from };
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(size - from);
    readSync(fd, buf, 0, buf.length, from);
    const text = buf.toString("utf8");
    const complete = text.slice(0, text.lastIndexOf("\n") + 1);
    const said = complete
      .split("\n")
      .some((l) => l.includes(marker) && l.includes('"msg":"begin"'));
    return { said, next: from + Buffer.byteLength(complete) };
  } finally {
    closeSync(fd);
  }
}

export class FaultInjector {
  /** Processes this run started again (operator copies, kube-apiserver): stopped at its end. */
  readonly respawned = new Set<number>();
  /** Control-plane processes being killed and started again (kube-apiserver, etcd). */
  private readonly cpDown = new Set<string>();
  /** A bad release is the target: a retarget meanwhile would be undone when it is set back. */
  private badUnderWay = false;
  private retargeted = false;
  /** Operator copies being killed and started again. */
  private readonly restarting = new Set<string>();
  /** Machines whose power cut is under way (a phase seen once is one machine's, once). */
  private readonly cutting = new Set<string>();
  readonly applied: string[] = [];
  /** Rules a fault's own outcome broke (a bad release the fleet never stopped). */
  readonly broken: TortureViolation[] = [];
  /** The recalls this run signed, for the recall rules (recall-rules.ts). */
  readonly recallMarks: RecallMark[] = [];
  /** The publisher's fix is out (after a recall): the fleet follows it, whatever is older. */
  private fixPublished = false;
  /** Agents' pauses (SIGSTOP windows): an agent paused cannot see a recall. */
  readonly stalls: Stall[] = [];
  /** When the bad release became the target (the floor rule counts from here). */
  badSetAt: number | undefined;

  constructor(private readonly t: FaultTargets) {}

  /** Applies every fault at its time after `t0`, each in its own task; resolves when all are done. */
  async run(faults: readonly TortureFault[], t0: number, endAt: number): Promise<void> {
    await Promise.all(
      faults.map(async (f) => {
        await sleep(Math.max(0, t0 + f.at - Date.now()));
        this.t.log(`  fault ${describeFault(f)}: applying`);
        const said = await this.apply(f, endAt).catch(
          (e: unknown) => `failed: ${(e as Error).message}`,
        );
        const line = `${describeFault(f)}: ${said}`;
        this.applied.push(line);
        this.t.log(`  fault ${line}`);
      }),
    );
  }

  private bootIdOf(machine: string): string {
    const m = this.t.fleet.machines.get(machine);
    try {
      return m ? readFileSync(m.bootIdFile, "utf8").trim() : "unknown";
    } catch {
      return "unknown";
    }
  }

  private async apply(f: TortureFault, endAt: number): Promise<string> {
    const { fleet } = this.t;
    switch (f.kind) {
      case "agent-kill": {
        const m = fleet.machines.get(f.machine)!;
        if (m.agentPid === undefined) return "skipped: no agent running";
        m.crashAgent();
        return "done";
      }
      case "agent-pause":
        return this.pauseAgent(f.machine, f.ms);
      case "operator-pause": {
        const pid = fleet.operators.get(f.copy)!;
        signal(pid, "SIGSTOP");
        await sleep(f.ms);
        signal(pid, "SIGCONT");
        this.t.record({ kind: "operator-start", at: Date.now(), copy: f.copy });
        return "done";
      }
      case "operator-kill":
        return this.restartCopy(f);
      case "apiserver-restart":
        return this.restartControlPlane("kube-apiserver", f.ms);
      case "etcd-restart":
        return this.restartControlPlane("etcd", f.ms);
      case "retarget":
        return this.retarget();
      case "bad-release":
        return this.badRelease(f.ms);
      case "relay-cut": {
        const relay = this.t.relays.get(f.machine)!;
        relay.sever();
        await sleep(f.ms);
        relay.heal();
        return "done";
      }
      case "power-cut":
        return this.powerCut(f, endAt);
      case "ca-rotated":
        return this.caRotated(f.machine);
      case "cert-lapse":
        return this.certLapse(f.machine);
      case "recall":
        return this.recall(f.ms);
      default: {
        const never: never = f;
        throw new Error(`unknown fault ${JSON.stringify(never)}`);
      }
    }
  }

  /** SIGSTOP of the agent's group (the agent and its download child), SIGCONT after `ms`. */
  private async pauseAgent(machine: string, ms: number): Promise<string> {
    const pid = this.t.fleet.machines.get(machine)!.agentPid;
    if (pid === undefined) return "skipped: no agent running";
    const from = Date.now();
    signal(pid, "SIGSTOP", true);
    await sleep(ms);
    signal(pid, "SIGCONT", true);
    this.stalls.push({ machine, from, to: Date.now() });
    return "done";
  }

  private async powerCut(
    f: Extract<TortureFault, { kind: "power-cut" }>,
    endAt: number,
  ): Promise<string> {
    const { fleet } = this.t;
    // A cut drawn for a phase falls on the first machine to begin it: a phase lasts well
    // under a second and each machine passes it once, so waiting for one machine's would
    // mostly wait in vain.
    const victim = f.when === "any" ? f.machine : await this.firstTo(f.when, endAt);
    if (victim === undefined) return `skipped: no machine began "${f.when}" in the fault window`;
    // One cut of a machine at a time: two at once would power it on twice (two boots,
    // two agents), which no machine does. (firstTo claims its machine itself.)
    if (f.when === "any") {
      if (this.cutting.has(victim)) return `skipped: a power cut of ${victim} is under way`;
      this.cutting.add(victim);
    }
    this.t.record({
      kind: "reboot",
      at: Date.now(),
      machine: victim,
      bootId: this.bootIdOf(victim),
      cause: "power",
    });
    try {
      await fleet.machines.get(victim)!.powerCycle();
    } finally {
      this.cutting.delete(victim);
    }
    return `done (${victim})`;
  }

  /** SIGKILL of a control-plane process, started again after `ms` with what /proc showed. */
  private async restartControlPlane(name: string, ms: number): Promise<string> {
    if (this.cpDown.has(name)) return `skipped: ${name} is already restarting`;
    const rec = this.t.lab.controlPlane.processes.find((p) => p.name === name)!;
    this.cpDown.add(name);
    try {
      const image = imageOf(rec.pid);
      signal(rec.pid, "SIGKILL");
      await sleep(ms);
      const fresh = respawn(image, rec.log);
      this.respawned.add(fresh);
      rec.pid = fresh;
      return `done (pid ${fresh})`;
    } finally {
      this.cpDown.delete(name);
    }
  }

  /** spec.version moved, once, to the newer good release: the fleet must end on it. */
  private async retarget(): Promise<string> {
    if (this.badUnderWay) return "skipped: a bad release is the target";
    if (this.retargeted) return "skipped: already retargeted";
    this.retargeted = true;
    const next = this.t.releases.next;
    if (this.t.channel !== undefined) {
      // A follower's retarget: the newer release published in the channel. After a recall's
      // fix (newer still) the fleet stays on the fix: a follower never goes down.
      await this.t.channel.signed.publish(next.version);
      if (!this.fixPublished) this.t.target = next;
      return `done (${next.version} published in the signed channel; the target is ${this.t.target.version})`;
    }
    await this.setTarget(next);
    this.t.target = next;
    return `done (${next.version})`;
  }

  /**
   * A signed recall of the release the fleet follows now; then, once the operator shows it
   * (status.trust.recalls) or its bound passed (the interval and RECALL_SLACK_MS after it was
   * signed), and `fixMs` more, the publisher's fix is published: the fleet must end on it.
   */
  private async recall(fixMs: number): Promise<string> {
    const ch = this.t.channel;
    if (ch === undefined) return "skipped: the Cluster does not follow a signed channel";
    if (this.badUnderWay) return "skipped: a bad release is under way";
    if (this.fixPublished) return "skipped: the fix is published already";
    const r = this.t.target;
    const { shown, s } = await this.signRecall(ch, r, "the torture's recall, mid-rollout");
    await sleep(fixMs);
    const fix = await this.publishFix(ch);
    return shown
      ? `done (${r.version} recalled; shown on the Cluster after ${s} s; fix ${fix} published)`
      : `failed: ${r.version} recalled and not shown on the Cluster within ${s} s (fix ${fix} published)`;
  }

  /**
   * Signs a recall of `r` and marks it for the recall rules; waits until the operator shows it
   * (status.trust.recalls) or its bound passed (the interval and RECALL_SLACK_MS after it was
   * signed).
   */
  private async signRecall(
    ch: NonNullable<FaultTargets["channel"]>,
    r: LabRelease,
    reason: string,
  ): Promise<{ shown: boolean; s: string }> {
    await ch.signed.recall(r.version, reason);
    const signedAt = Date.now();
    const boundAt = signedAt + ch.intervalMs + RECALL_SLACK_MS;
    const release = { version: r.version, digest: r.digest };
    this.recallMarks.push({ release, signedAt, boundAt });
    let shown = false;
    while (!shown && Date.now() < boundAt) {
      await sleep(STOPPED_POLL_MS);
      const c = await this.t.lab.api.clusters.get(LAB_CLUSTER).catch(() => undefined);
      shown = c !== undefined && showsRecall(c, release);
    }
    return { shown, s: ((Date.now() - signedAt) / 1000).toFixed(1) };
  }

  /** The publisher's fix, the newest release, published: the target the fleet must end on. */
  private async publishFix(ch: NonNullable<FaultTargets["channel"]>): Promise<string> {
    const fix = this.t.releases.fix;
    await ch.signed.publish(fix.version);
    this.fixPublished = true;
    this.t.target = fix;
    return fix.version;
  }

  /** Catalogs `r` and makes it `spec.version` (setTargetOnce), as a person would (asPerson). */
  private async setTarget(r: LabRelease, revert?: RevertPolicy | null): Promise<void> {
    await this.asPerson(() => this.setTargetOnce(r, revert));
  }

  /** spec.rollout.revert set (null: taken away) as a person would, tried again as setTarget. */
  private async setRevertPolicy(revert: RevertPolicy | null): Promise<void> {
    await this.asPerson(() =>
      this.t.lab.api.clusters.patch(LAB_CLUSTER, { spec: { rollout: { revert } } }),
    );
  }

  /**
   * A person's write, tried again while the API server answers that it is busy or starting (503
   * after a restart drawn just before: seen in seed 2's run), for up to SET_TARGET_RETRY_MS; any
   * other error, or one that lasts, fails the fault.
   */
  private async asPerson(write: () => Promise<unknown>): Promise<void> {
    const from = Date.now();
    for (;;) {
      try {
        await write();
        return;
      } catch (e) {
        const retryable = (e as { retryable?: boolean }).retryable === true;
        if (!retryable || Date.now() - from > SET_TARGET_RETRY_MS) throw e;
        await sleep(STOPPED_POLL_MS);
      }
    }
  }

  /** `revert`: spec.rollout.revert set with the target (null: taken away; undefined: kept). */
  private async setTargetOnce(r: LabRelease, revert?: RevertPolicy | null): Promise<void> {
    const { api } = this.t.lab;
    const c = await api.clusters.get(LAB_CLUSTER);
    const catalog = c.spec.releases.catalog ?? [];
    await api.clusters.patch(LAB_CLUSTER, {
      spec: {
        ...(revert === undefined ? {} : { rollout: { revert } }),
        version: r.version,
        releases: {
          catalog: catalog.some((x) => x.version === r.version)
            ? catalog
            : [...catalog, { version: r.version, digest: r.digest }],
        },
      },
    });
  }

  /**
   * A bad release made the target, with the revert threshold a person sets for a release they
   * doubt (one failed machine): `spec.version` in a pinned run, published in the signed channel
   * in a following one (badWay). Once the fleet stops it (the Cluster's Progressing reads
   * ReleaseFailed, or a revert of it is recorded) or `ms` has passed, a revert under way must
   * end, and the run moves on to a good target as a person or the publisher would.
   */
  private async badRelease(ms: number): Promise<string> {
    if (this.badUnderWay) return "skipped: a bad release is already the target";
    const bad = this.t.releases.bad;
    const ch = this.t.channel;
    if (ch !== undefined && this.fixPublished)
      return `skipped: the fix, newer than ${bad.version}, is published`;
    const way = ch === undefined ? this.pinnedBad() : this.publishedBad(ch);
    this.badUnderWay = true;
    const from = Date.now();
    this.badSetAt = from;
    try {
      await way.start();
      const { stopped, revert } = await this.untilStopped(from + ms);
      const s = ((Date.now() - from) / 1000).toFixed(1);
      const recalled = await way.afterStop();
      const reverted = revert === undefined ? "" : await this.revertEnds(revert);
      const end = await way.end();
      if (!stopped)
        this.broken.push({
          rule: "bad-release-not-stopped",
          at: Date.now(),
          message: `${bad.version}, whose kernel panics on every trial boot, ${way.was} for ${s} s and the Cluster never read ReleaseFailed: the fleet did not stop it`,
        });
      const how = revert === undefined ? "ReleaseFailed" : "reverted automatically";
      const said = recalled === "" ? "" : `; ${recalled}`;
      return stopped
        ? `done (${bad.version} ${way.stopped}: ${how} after ${s} s${said}${reverted}; ${end})`
        : `failed: ${bad.version} not stopped within ${ms} ms (${[recalled, end].filter((x) => x !== "").join("; ")})`;
    } finally {
      this.badUnderWay = false;
    }
  }

  /** A pinned run's bad release: spec.version, then the good target set back, as a person would. */
  private pinnedBad(): BadWay {
    return {
      was: "was the target",
      stopped: "stopped",
      start: () => this.setTarget(this.t.releases.bad, { maxFailures: BAD_MAX_FAILURES }),
      afterStop: () => Promise.resolve(""),
      end: async () => {
        await this.setTarget(this.t.target, null);
        return `target set back to ${this.t.target.version}`;
      },
    };
  }

  /**
   * A following run's bad release: published in the signed channel (the threshold set first).
   * Once the fleet stopped it, its publisher recalls it, as a publisher would: a revert under
   * way must still end (a recall stops turns for a release, not the way back from it: issue
   * 38's first scenario, under real faults), and the recall rules judge it too. Then the
   * publisher's fix is published, and the threshold taken away.
   */
  private publishedBad(ch: NonNullable<FaultTargets["channel"]>): BadWay {
    const bad = this.t.releases.bad;
    return {
      was: "was published in the followed channel",
      stopped: "published and stopped",
      start: async () => {
        await this.setRevertPolicy({ maxFailures: BAD_MAX_FAILURES });
        await ch.signed.publish(bad.version);
      },
      afterStop: async () => {
        const r = await this.signRecall(ch, bad, "the torture's bad release, stopped");
        return r.shown ? `recalled, shown ${r.s} s after` : `recalled, NOT shown within ${r.s} s`;
      },
      end: async () => {
        const fix = await this.publishFix(ch);
        await this.setRevertPolicy(null);
        return `fix ${fix} published`;
      },
    };
  }

  /**
   * Reads the Cluster until the bad release is stopped (Progressing ReleaseFailed, or a revert
   * of it recorded: `revert`, its target) or `until` has passed.
   */
  private async untilStopped(
    until: number,
  ): Promise<{ stopped: boolean; revert: ReleaseRef | undefined }> {
    const bad = this.t.releases.bad.version;
    for (;;) {
      await sleep(STOPPED_POLL_MS);
      const c = await this.t.lab.api.clusters.get(LAB_CLUSTER).catch(() => undefined);
      const r = c?.status?.revert;
      if (r !== undefined && r.from.version === bad) return { stopped: true, revert: r.to };
      const p = c?.status?.conditions?.find((x) => x.type === "Progressing");
      if (p?.reason === "ReleaseFailed") return { stopped: true, revert: undefined };
      if (Date.now() >= until) return { stopped: false, revert: undefined };
    }
  }

  /**
   * A revert that starts ends: every Machine Ready on its target within revertEndMs. Says how
   * it went (for the fault's line); a revert that did not end is a violation.
   */
  private async revertEnds(to: ReleaseRef): Promise<string> {
    const from = Date.now();
    for (;;) {
      const list = await this.t.lab.api.machines.list().catch(() => undefined);
      const back = list?.items.filter(
        (m) => m.status?.version === to.version && m.status.step === "Ready",
      );
      const s = ((Date.now() - from) / 1000).toFixed(1);
      if (back !== undefined && back.length === this.t.lab.fleet.length)
        return `; every machine back on ${to.version} ${s} s later`;
      if (Date.now() - from > this.t.revertEndMs) {
        const n = back?.length ?? 0;
        this.broken.push({
          rule: "revert-not-ended",
          at: Date.now(),
          message: `the automatic revert of ${this.t.releases.bad.version} to ${to.version} started ${s} s ago and ${n} of ${this.t.lab.fleet.length} machines are Ready on ${to.version}: the revert did not end`,
        });
        return `; the revert did not end: ${n}/${this.t.lab.fleet.length} machines back on ${to.version} after ${s} s`;
      }
      await sleep(STOPPED_POLL_MS);
    }
  }

  /**
   * The machine's certificate rotated away (./ca-rotation.ts) and its agent restarted on it;
   * then the machine must rejoin by itself within CA_ROTATED_REJOIN_MS: its Machine reports a
   * new key, a write only an identity the API server accepts can make.
   */
  private async caRotated(machine: string): Promise<string> {
    const m = this.t.fleet.machines.get(machine)!;
    const before = rotateAway(path.dirname(m.identityKubeconfig), machine);
    if (before === undefined) return "skipped: the machine holds no certificate yet";
    m.crashAgent();
    const w = await this.untilRejoined(machine, (st) => st?.certificateKeyDigest !== before);
    if (w.ok) return `done (${machine} rejoined, proving its key, after ${w.s} s)`;
    this.broken.push({
      rule: "ca-rotation-not-rejoined",
      at: Date.now(),
      machine,
      message: `${machine}'s certificate was re-signed by a CA the API server does not trust ${w.s} s ago and its Machine still reports key ${w.key ?? "(none)"}: it did not rejoin by itself`,
    });
    return `failed: ${machine} not rejoined within ${CA_ROTATED_REJOIN_MS} ms`;
  }

  /**
   * Reads the Machine until `rejoined` holds of its status (it carries a key digest, which only
   * an accepted identity writes) or CA_ROTATED_REJOIN_MS has passed.
   */
  private async untilRejoined(
    machine: string,
    rejoined: (status: Machine["status"]) => boolean,
  ): Promise<{ ok: boolean; s: string; key: string | undefined }> {
    const from = Date.now();
    for (;;) {
      const st = (await this.t.lab.api.machines.get(machine).catch(() => undefined))?.status;
      const s = ((Date.now() - from) / 1000).toFixed(1);
      const key = st?.certificateKeyDigest;
      if (key !== undefined && rejoined(st)) return { ok: true, s, key };
      if (Date.now() - from > CA_ROTATED_REJOIN_MS) return { ok: false, s, key };
      await sleep(STOPPED_POLL_MS);
    }
  }

  /**
   * The machine's network cut until its certificate has expired (and LAPSE_MARGIN_MS more),
   * then healed: it must join again with the bootstrap credential by itself, within
   * CA_ROTATED_REJOIN_MS (a new key on its Machine, written with the new identity).
   */
  private async certLapse(machine: string): Promise<string> {
    const m = this.t.fleet.machines.get(machine)!;
    const held = readHeld(path.dirname(m.identityKubeconfig));
    if (held === undefined) return "skipped: the machine holds no certificate yet";
    const relay = this.t.relays.get(machine)!;
    relay.sever();
    // A renewal that raced the cut gives a later end: the cut lasts until the one held then.
    let end = held.notAfterMs;
    while (Date.now() < end + LAPSE_MARGIN_MS) {
      await sleep(Math.max(0, end + LAPSE_MARGIN_MS - Date.now()));
      end = readHeld(path.dirname(m.identityKubeconfig))?.notAfterMs ?? end;
    }
    relay.heal();
    const before = readHeld(path.dirname(m.identityKubeconfig))?.keyDigest;
    // A certificate issued after the lapse: a new key, ending after the lapsed one.
    const w = await this.untilRejoined(
      machine,
      (st) => st?.certificateKeyDigest !== before && Date.parse(st?.certificateExpiry ?? "") > end,
    );
    const lapsedAt = new Date(end).toISOString();
    if (w.ok)
      return `done (${machine}'s certificate lapsed at ${lapsedAt}; it joined again ${w.s} s after the network healed)`;
    this.broken.push({
      rule: "lapse-not-rejoined",
      at: Date.now(),
      machine,
      message: `${machine}'s certificate lapsed at ${lapsedAt} while its network was cut; healed ${w.s} s ago, its Machine still reports key ${w.key ?? "(none)"}: it did not join again by itself`,
    });
    return `failed: ${machine} not joined again within ${CA_ROTATED_REJOIN_MS} ms of the heal`;
  }

  /** SIGKILL of an operator copy, and its start again after `f.ms` (as its Deployment would). */
  private async restartCopy(f: Extract<TortureFault, { kind: "operator-kill" }>): Promise<string> {
    const { fleet } = this.t;
    // One restart of a copy at a time: a second kill meanwhile would find the pid gone.
    if (this.restarting.has(f.copy)) return `skipped: ${f.copy} is already restarting`;
    this.restarting.add(f.copy);
    try {
      const pid = fleet.operators.get(f.copy)!;
      const image = imageOf(pid);
      signal(pid, "SIGCONT"); // a paused copy dies as surely
      signal(pid, "SIGKILL");
      await sleep(f.ms);
      const fresh = respawn(image, path.join(LAB_RUN_DIR, `operator-${f.copy}.log`));
      this.respawned.add(fresh);
      fleet.operators.set(f.copy, fresh);
      this.t.record({ kind: "operator-start", at: Date.now(), copy: f.copy });
      return `done (pid ${pid} -> ${fresh})`;
    } finally {
      this.restarting.delete(f.copy);
    }
  }

  /**
   * The first machine to reach the instant a power cut is drawn for: a Machine step the
   * watcher sees (Downloading), or a phase its agent's log begins (a phase lasts milliseconds
   * to a second: the log, read on from where it ended, is the only place it shows in time).
   */
  private async firstTo(when: Exclude<CutWhen, "any">, endAt: number): Promise<string | undefined> {
    const marker = JSON.stringify({ step: when }).slice(1, -1);
    const from = new Map([...this.t.fleet.machines].map(([n, m]) => [n, sizeOf(m.logFile)]));
    for (;;) {
      for (const [name, m] of this.t.fleet.machines) {
        if (when === "Downloading") {
          if (this.t.stepOf(name) === when && !this.cutting.has(name)) {
            this.cutting.add(name);
            return name;
          }
          continue;
        }
        const look = saidSince(m.logFile, from.get(name)!, marker);
        from.set(name, look.next);
        // Claimed here, in the same turn of the event loop: another cut waiting for the same
        // phase must not fall on the same line of the same log.
        if (look.said && !this.cutting.has(name)) {
          this.cutting.add(name);
          return name;
        }
      }
      if (Date.now() > endAt) return undefined;
      await sleep(when === "Downloading" ? STEP_POLL_MS : LOG_POLL_MS);
    }
  }

  /** Ends what this run started again (the lab's stoppers know only the first copies). */
  stop(): void {
    for (const pid of this.respawned) signal(pid, "SIGKILL");
  }
}
