// The torture's faults on what the fleet runs: a retarget to the newer good release, a signed
// recall of the release it follows (then the publisher's fix), and a bad release made the
// target, which the fleet must stop (and revert from, when it reverts) within the fault's time.
// They share what is under way, so one never undoes another: a retarget during a bad release
// would be undone when the good target is set back, and nothing goes below a published fix.
import { setTimeout as sleep } from "node:timers/promises";
import type { ReleaseRef } from "../api/types.js";
import type { TortureViolation } from "./violation.js";
import { LAB_CLUSTER } from "../lab/paths.js";
import type { LabRelease } from "../lab/releases.js";
import { RECALL_SLACK_MS, showsRecall, type RecallMark } from "./recall-rules.js";
import { STOPPED_POLL_MS, type FaultTargets } from "./fault-targets.js";
import { setRevertPolicy, setTarget } from "./person-writes.js";

/** How a bad release is made the target and how the run moves past it (ReleaseFaults.badRelease). */
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

/** The bad release's revert threshold: its first failed machine reverts the fleet. */
const BAD_MAX_FAILURES = 1;

type Channel = NonNullable<FaultTargets["channel"]>;

export class ReleaseFaults {
  /** A bad release is the target: a retarget meanwhile would be undone when it is set back. */
  private badUnderWay = false;
  private retargeted = false;
  /** The recalls this run signed, for the recall rules (recall-rules.ts). */
  readonly recallMarks: RecallMark[] = [];
  /** The publisher's fix is out (after a recall): the fleet follows it, whatever is older. */
  private fixPublished = false;
  /** When the bad release became the target (the floor rule counts from here). */
  badSetAt: number | undefined;

  /** `broken`: the injector's list of rules a fault's own outcome broke. */
  constructor(
    private readonly t: FaultTargets,
    private readonly broken: TortureViolation[],
  ) {}

  /** spec.version moved, once, to the newer good release: the fleet must end on it. */
  async retarget(): Promise<string> {
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
    await setTarget(this.t.lab, next);
    this.t.target = next;
    return `done (${next.version})`;
  }

  /**
   * A signed recall of the release the fleet follows now; then, once the operator shows it
   * (status.trust.recalls) or its bound passed (the interval and RECALL_SLACK_MS after it was
   * signed), and `fixMs` more, the publisher's fix is published: the fleet must end on it.
   */
  async recall(fixMs: number): Promise<string> {
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
    ch: Channel,
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
  private async publishFix(ch: Channel): Promise<string> {
    const fix = this.t.releases.fix;
    await ch.signed.publish(fix.version);
    this.fixPublished = true;
    this.t.target = fix;
    return fix.version;
  }

  /**
   * A bad release made the target, with the revert threshold a person sets for a release they
   * doubt (one failed machine): `spec.version` in a pinned run, published in the signed channel
   * in a following one (badWay). Once the fleet stops it (the Cluster's Progressing reads
   * ReleaseFailed, or a revert of it is recorded) or `ms` has passed, a revert under way must
   * end, and the run moves on to a good target as a person or the publisher would.
   */
  async badRelease(ms: number): Promise<string> {
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
      start: () => setTarget(this.t.lab, this.t.releases.bad, { maxFailures: BAD_MAX_FAILURES }),
      afterStop: () => Promise.resolve(""),
      end: async () => {
        await setTarget(this.t.lab, this.t.target, null);
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
  private publishedBad(ch: Channel): BadWay {
    const bad = this.t.releases.bad;
    return {
      was: "was published in the followed channel",
      stopped: "published and stopped",
      start: async () => {
        await setRevertPolicy(this.t.lab, { maxFailures: BAD_MAX_FAILURES });
        await ch.signed.publish(bad.version);
      },
      afterStop: async () => {
        const r = await this.signRecall(ch, bad, "the torture's bad release, stopped");
        return r.shown ? `recalled, shown ${r.s} s after` : `recalled, NOT shown within ${r.s} s`;
      },
      end: async () => {
        const fix = await this.publishFix(ch);
        await setRevertPolicy(this.t.lab, null);
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
}
