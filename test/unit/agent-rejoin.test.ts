// "Rejoined means this boot" (src/agent/rejoin.ts) and what a trial boot does with it
// (steps.ts decideOnTrial), the trial boot whose release is no longer the target, and the
// report of a trial given up without a verdict (memory-verdicts.ts fellBack, operator/brake.ts).
import { describe, expect, it } from "vitest";
import type { Machine } from "../../src/api/types.js";
import { isVerdict, GIVE_UP_REASONS } from "../../src/agent/give-up.js";
import { armed, EMPTY_MEMORY, gaveUp, nodeBootSeen } from "../../src/agent/memory.js";
import { fellBack } from "../../src/agent/memory-verdicts.js";
import {
  HEARTBEAT_SLACK_MS,
  SEEN_BOOT_IDS_MAX,
  rejoinOf,
  withSeen,
  type RejoinLook,
} from "../../src/agent/rejoin.js";
import { DEFAULT_TIMEOUTS, decide, type Observed } from "../../src/agent/steps.js";
import { failedTrialOf } from "../../src/operator/turns/brake.js";
import { BOOT_STARTED_AT, observed, V1, V2, V3 } from "./agent-fixtures.js";

const THIS = "boot-2";
const OLD = "boot-1";
const FRESH = BOOT_STARTED_AT + 30_000;
const STALE = BOOT_STARTED_AT - 40_000;

describe("rejoined means this boot: rejoinOf", () => {
  const look = (over: Partial<RejoinLook>): RejoinLook => ({
    apiReachable: true,
    nodeUnread: undefined,
    node: { bootId: THIS, ready: { status: "True", heartbeatAt: FRESH } },
    nodeName: "m1",
    bootId: THIS,
    bootStartedAt: BOOT_STARTED_AT,
    ...over,
  });
  const rows: { name: string; l: RejoinLook; kind: string; why?: RegExp }[] = [
    { name: "new id, Ready fresh: rejoined", l: look({}), kind: "rejoined" },
    {
      name: "new id, Ready at the boot's second (whole-second heartbeat): rejoined",
      l: look({
        node: { bootId: THIS, ready: { status: "True", heartbeatAt: BOOT_STARTED_AT - 999 } },
      }),
      kind: "rejoined",
    },
    {
      name: "new id, Ready stale (a heartbeat before this boot)",
      l: look({ node: { bootId: THIS, ready: { status: "True", heartbeatAt: STALE } } }),
      kind: "not-rejoined",
      why: /Node m1 is Ready with a heartbeat \(.*\) from before this boot/,
    },
    {
      name: "new id, Ready without a heartbeat",
      l: look({ node: { bootId: THIS, ready: { status: "True" } } }),
      kind: "not-rejoined",
      why: /heartbeat \(none\)/,
    },
    {
      name: "new id, Ready False",
      l: look({ node: { bootId: THIS, ready: { status: "False", heartbeatAt: FRESH } } }),
      kind: "not-rejoined",
      why: /shows this boot's id but Ready is False/,
    },
    {
      name: "new id, no Ready condition",
      l: look({ node: { bootId: THIS } }),
      kind: "not-rejoined",
      why: /Ready is missing/,
    },
    {
      name: "old id, Ready fresh (kwok or a stale copy): not this boot",
      l: look({ node: { bootId: OLD, ready: { status: "True", heartbeatAt: FRESH } } }),
      kind: "not-rejoined",
      why: /Node m1 shows bootID boot-1, not this boot's boot-2/,
    },
    {
      name: "old id, Ready stale: not this boot",
      l: look({ node: { bootId: OLD, ready: { status: "True", heartbeatAt: STALE } } }),
      kind: "not-rejoined",
      why: /bootID boot-1, not this boot's/,
    },
    {
      name: "no bootID at all",
      l: look({ node: { bootId: "", ready: { status: "True", heartbeatAt: FRESH } } }),
      kind: "not-rejoined",
      why: /shows no bootID/,
    },
    {
      name: "no Node of that name",
      l: look({ node: undefined }),
      kind: "not-rejoined",
      why: /Node m1 does not exist/,
    },
    {
      name: "Node unreadable (403): no look, no verdict",
      l: look({ node: undefined, nodeUnread: "nodes is forbidden [LIKEN_API_FORBIDDEN]" }),
      kind: "unread",
      why: /cannot read Node m1: nodes is forbidden/,
    },
    {
      name: "API server not reachable: no look, no verdict",
      l: look({ apiReachable: false }),
      kind: "unread",
      why: /API server not reachable/,
    },
  ];
  it.each(rows)("$name", ({ l, kind, why }) => {
    const r = rejoinOf(l);
    expect(r.kind).toBe(kind);
    if (why !== undefined) expect("why" in r ? r.why : "").toMatch(why);
  });

  it("the slack is the heartbeat's whole seconds plus rounding, no more", () => {
    const at = (heartbeatAt: number) =>
      rejoinOf(look({ node: { bootId: THIS, ready: { status: "True", heartbeatAt } } })).kind;
    expect(at(BOOT_STARTED_AT - HEARTBEAT_SLACK_MS)).toBe("rejoined");
    expect(at(BOOT_STARTED_AT - HEARTBEAT_SLACK_MS - 1)).toBe("not-rejoined");
  });

  it("keeps the bootIDs seen once each, newest last, bounded", () => {
    let l: string[] = [];
    for (const id of ["a", "b", "a", "c", "d"]) l = withSeen(l, id);
    expect(l).toEqual(["a", "c", "d"]);
    expect(l).toHaveLength(SEEN_BOOT_IDS_MAX);
  });
});

describe("the trial boot: promoted only on this boot's rejoin", () => {
  const onTrial = (over: Partial<Observed>): Observed =>
    observed({
      boot: { kind: "on-trial", slot: "b" },
      running: { slot: "b", state: "staged", release: V2 },
      other: { slot: "a", state: "staged", release: V1 },
      bootId: THIS,
      node: { bootId: THIS, ready: { status: "True", heartbeatAt: FRESH } },
      trialSeenAt: 1_000_000 - 1_000,
      ...over,
    });
  const PAST = { trialSeenAt: 1_000_000 - DEFAULT_TIMEOUTS.proveMs };
  const oldNode = { bootId: OLD, ready: { status: "True", heartbeatAt: FRESH } };
  const rows: {
    name: string;
    o: Observed;
    action: string;
    failure?: string;
    reason?: RegExp;
  }[] = [
    { name: "this boot's id, Ready fresh: promote", o: onTrial({}), action: "promote" },
    {
      name: "the previous boot's id and its Ready=True (the issue's case): wait, never promote",
      o: onTrial({ node: oldNode }),
      action: "wait",
    },
    {
      name: "this boot's id, Ready stale: wait",
      o: onTrial({ node: { bootId: THIS, ready: { status: "True", heartbeatAt: STALE } } }),
      action: "wait",
    },
    {
      name: "Node unreadable: wait",
      o: onTrial({ node: undefined, nodeUnread: "forbidden [LIKEN_API_FORBIDDEN]" }),
      action: "wait",
    },
    {
      name: "past the deadline, the old id seen: NodeNotRejoined naming the Node and the ids",
      o: onTrial({ ...PAST, node: oldNode, nodeBootIds: [OLD] }),
      action: "reboot",
      failure: "NodeNotRejoined",
      reason:
        /trial of slot b did not rejoin within 900000 ms: Node m1 shows bootID boot-1, not this boot's boot-2 \(bootIDs it showed on this boot: boot-1\)/,
    },
    {
      name: "past the deadline, this id but Ready stale: NodeNotRejoined",
      o: onTrial({
        ...PAST,
        node: { bootId: THIS, ready: { status: "True", heartbeatAt: STALE } },
        nodeBootIds: [OLD, THIS],
      }),
      action: "reboot",
      failure: "NodeNotRejoined",
      reason: /from before this boot .*bootIDs it showed on this boot: boot-1, boot-2/,
    },
    {
      name: "past the deadline, no Node at all: NodeNotRejoined",
      o: onTrial({ ...PAST, node: undefined }),
      action: "reboot",
      failure: "NodeNotRejoined",
      reason: /Node m1 does not exist \(bootIDs it showed on this boot: \(none\)\)/,
    },
    {
      name: "past the deadline, Node never read (403): TrialUnobserved, no verdict",
      o: onTrial({ ...PAST, node: undefined, nodeUnread: "forbidden [LIKEN_API_FORBIDDEN]" }),
      action: "reboot",
      failure: "TrialUnobserved",
      reason: /never read Node m1 \(cannot read Node m1: forbidden .*\); no verdict on the release/,
    },
    {
      name: "past the deadline, API never reached: TrialUnobserved",
      o: onTrial({ ...PAST, apiReachable: false, node: undefined }),
      action: "reboot",
      failure: "TrialUnobserved",
      reason: /never read Node m1 \(API server not reachable\)/,
    },
    {
      name: "past the deadline, unreadable now but the old id seen earlier: NodeNotRejoined",
      o: onTrial({ ...PAST, apiReachable: false, node: undefined, nodeBootIds: [OLD] }),
      action: "reboot",
      failure: "NodeNotRejoined",
      reason: /API server not reachable; earlier Node m1 showed bootID boot-1, this boot is boot-2/,
    },
    {
      name: "the target changed while it rebooted: not promoted, falls back (TargetChanged)",
      o: onTrial({ target: V3 }),
      action: "reboot",
      failure: "TargetChanged",
      reason: /trial of 2026.10.12-001 in slot b: the Cluster's target is now 2026.10.14-001/,
    },
    {
      name: "the target changed and the Node never rejoined: TargetChanged at once",
      o: onTrial({ target: V3, node: oldNode }),
      action: "reboot",
      failure: "TargetChanged",
    },
    {
      name: "the target went back to the running default's release: falls back to it",
      o: onTrial({ target: V1 }),
      action: "reboot",
      failure: "TargetChanged",
    },
    {
      name: "the same version with another digest is another release: falls back",
      o: onTrial({ target: { ...V2, digest: V3.digest } }),
      action: "reboot",
      failure: "TargetChanged",
    },
    {
      name: "API down: the target is not known, so no TargetChanged (it waits)",
      o: onTrial({ target: V3, apiReachable: false, node: undefined }),
      action: "wait",
    },
  ];
  it.each(rows)("$name", ({ o, action, failure, reason }) => {
    const d = decide(o);
    expect(d.action.kind).toBe(action);
    if (d.action.kind === "reboot") {
      expect(d.action.failure).toBe(failure);
      if (reason !== undefined) expect(d.action.reason).toMatch(reason);
    }
  });
});

describe("a trial given up without a verdict: reported, not remembered, not counted", () => {
  const AT = "2026-12-02T10:00:00Z";
  const after = (reason: (typeof GIVE_UP_REASONS)[number]) =>
    fellBack(gaveUp(armed(EMPTY_MEMORY, V2, "b", AT), `why ${reason}`, reason), "b", "a", V2, AT);

  it.each([
    ["NodeNotRejoined", "Failed", true],
    ["HealthCheckFailed", "Failed", true],
    ["TrialUnobserved", "Inconclusive", false],
    ["TargetChanged", "Inconclusive", false],
  ] as const)("%s: lastTrial %s, remembered as failed: %s", (reason, result, remembered) => {
    expect(isVerdict(reason)).toBe(remembered);
    const m = after(reason);
    expect(m.lastTrial).toMatchObject({ ...V2, result, reason });
    expect(m.lastTrial?.message).toContain(`why ${reason}`);
    expect(m.failed.map((f) => f.digest)).toEqual(remembered ? [V2.digest] : []);
    const machine = {
      metadata: { name: "m1" },
      status: { lastTrial: m.lastTrial, failedReleases: m.failed },
    } as Machine;
    // The operator's failure brake counts exactly the verdicts.
    expect(failedTrialOf(machine, V2) !== undefined).toBe(remembered);
  });

  it("the second TrialUnobserved trial of the same release in a row is a verdict", () => {
    const unobserved = (m: typeof EMPTY_MEMORY, release = V2) =>
      fellBack(
        gaveUp(armed(m, release, "b", AT), "never read Node m1", "TrialUnobserved"),
        "b",
        "a",
        undefined,
        AT,
      );
    const first = unobserved(EMPTY_MEMORY);
    expect(first.lastTrial).toMatchObject({ result: "Inconclusive", reason: "TrialUnobserved" });
    expect(first.failed).toEqual([]);
    const second = unobserved(first);
    expect(second.lastTrial).toMatchObject({ result: "Failed", reason: "TrialUnobserved" });
    expect(second.lastTrial?.message).toMatch(/the second trial of this release in a row/);
    expect(second.failed.map((f) => f.digest)).toEqual([V2.digest]);
    // Another release in between resets the count.
    const other = unobserved(unobserved(first, V3));
    expect(other.lastTrial).toMatchObject({ ...V2, result: "Inconclusive" });
    // A trial that rejoined in between (promoted elsewhere, or a verdict) resets it as well.
    const afterVerdict = unobserved(after("NodeNotRejoined"));
    expect(afterVerdict.lastTrial).toMatchObject({ result: "Inconclusive" });
  });

  it("redone after a crash before the disarm, the report keeps the trial boot's reason", () => {
    const once = after("TrialUnobserved");
    // The slot is withdrawn (no marker) or still names the release: nothing changes.
    expect(fellBack(once, "b", "a", undefined, "2026-12-02T10:05:00Z")).toBe(once);
    expect(fellBack(once, "b", "a", V2, "2026-12-02T10:05:00Z")).toBe(once);
  });

  it("a panic or a hang (no give-up recorded) stays TrialFellBack, a verdict", () => {
    const m = fellBack(armed(EMPTY_MEMORY, V2, "b", AT), "b", "a", V2, AT);
    expect(m.lastTrial).toMatchObject({ result: "Failed", reason: "TrialFellBack" });
    expect(m.failed).toHaveLength(1);
  });

  it("the Node's bootIDs are kept with the armed trial and leave with it", () => {
    let m = nodeBootSeen(armed(EMPTY_MEMORY, V2, "b", AT), OLD);
    m = nodeBootSeen(m, THIS);
    expect(m.trial?.nodeBootIds).toEqual([OLD, THIS]);
    expect(fellBack(m, "b", "a", V2, AT).trial).toBeUndefined();
    expect(nodeBootSeen(EMPTY_MEMORY, OLD)).toBe(EMPTY_MEMORY);
  });

  it("back on the old slot after it, the turn is given back before trying again", () => {
    const d = decide(
      observed({
        other: { slot: "b", state: "withdrawn" },
        drainedDigest: V2.digest,
        turn: true,
      }),
    );
    expect(d.action).toMatchObject({ kind: "release-turn" });
    expect(d.wantsTurn).toBe(false);
    // Once given back, it downloads the release again: the next try is a new turn and a drain.
    const next = decide(observed({ other: { slot: "b", state: "withdrawn" } }));
    expect(next.action).toMatchObject({ kind: "download", release: V2 });
  });
});
