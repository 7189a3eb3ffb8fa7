// The release the fleet may take (src/release-decision/decide.ts), as one table over the
// combinations issue 38 names: recall x revert x expiry x floor (revertFloor and taken) x unrevoke x clock.
// Each row: what the decision says (take R, hold by RULE, none) and what its message names.
import { describe, expect, it } from "vitest";
import type { ReleaseRef, RevertRecord, RevokedRelease } from "../../src/api/types.js";
import {
  decideRelease,
  trustExpired,
  type ReleaseDecision,
  type ReleaseInput,
  type TrustInput,
} from "../../src/release-decision/decide.js";
import { apiTimeOf, clockVerdict } from "../../src/release-decision/clock.js";
import { forgiven } from "../../src/release-decision/forgiven.js";
import { cluster, withSpec } from "./operator-fixtures.js";

const R = (v: string): ReleaseRef => ({
  version: `2026.11.0${v}-001`,
  digest: `sha256:${v.repeat(64)}`,
});
const V1 = R("1");
const V2 = R("2");
const V3 = R("3");
const NOW = new Date("2026-11-10T12:00:00Z");
const at = (s: number): Date => new Date(NOW.getTime() + s * 1000);
const HOUR = 3600;

const revert = (from: ReleaseRef, to: ReleaseRef): RevertRecord => ({
  from,
  to,
  trigger: "Automatic",
  reason: "RevertedOnFailedTrials",
  message: "2 of 4 machine(s) failed",
  by: "op-a",
  at: "2026-11-10T11:00:00Z",
});
const revoked = (r: ReleaseRef): RevokedRelease => ({
  ...r,
  reason: "RevertedOnFailedTrials",
  at: "2026-11-10T11:00:00Z",
});
const recall = (r: ReleaseRef) => ({ ...r, reason: "bad build" });

/** A channel that vouches for the choice, fresh for an hour more, reachable. */
const fresh: TrustInput = {
  vouches: true,
  expiresAt: at(HOUR),
  acceptExpiredSeconds: 0,
  reachable: true,
};
const input = (o: Partial<ReleaseInput>): ReleaseInput => ({
  chosen: V2,
  via: "follow",
  trust: fresh,
  recalls: [],
  revoked: [],
  revert: undefined,
  now: NOW,
  ...o,
});

const verdict = (d: ReleaseDecision): string => {
  switch (d.kind) {
    case "none":
      return "none";
    case "take":
      return `take ${d.release.version.slice(8, 10)}${d.revert === undefined ? "" : " (revert)"}`;
    case "hold":
      return `hold ${d.hold.rule}`;
  }
};

describe("decideRelease: one table", () => {
  // [case, input, verdict, words the message must hold]
  const rows: [string, ReleaseInput, string, string[]][] = [
    ["nothing chosen", input({ chosen: undefined }), "none", []],
    ["pinned: spec.version", input({ via: "spec", trust: undefined }), "take 02", []],
    ["channel fresh and reachable", input({}), "take 02", []],
    // recall
    [
      "recalled choice",
      input({ recalls: [recall(V2)] }),
      "hold Recalled",
      ["recalled", V2.version, "bad build", "liken rollout revert"],
    ],
    [
      "recalled, pinned mode",
      input({ via: "spec", trust: undefined, recalls: [recall(V2)] }),
      "hold Recalled",
      [V2.version],
    ],
    ["recall of another release", input({ recalls: [recall(V3)] }), "take 02", []],
    [
      "recall of the same version, another digest",
      input({ recalls: [{ ...V2, digest: V3.digest }] }),
      "take 02",
      [],
    ],
    // revocation and unrevoke (input.revert/revoked are read after the unrevoke applied)
    [
      "revoked choice",
      input({ revoked: [revoked(V2)] }),
      "hold Revoked",
      ["revoked", "liken rollout unrevoke"],
    ],
    ["unrevoked (cleared) choice", input({ revoked: [] }), "take 02", []],
    // revert
    [
      "revert in force",
      input({ chosen: V2, revert: revert(V2, V1), revoked: [revoked(V2)] }),
      "take 01 (revert)",
      [],
    ],
    [
      "revert of another release: not in force",
      input({ chosen: V3, revert: revert(V2, V1) }),
      "take 03",
      [],
    ],
    // 2.1: a recall of the release reverted FROM does not stop the revert
    [
      "revert in force, its from recalled",
      input({ revert: revert(V2, V1), revoked: [revoked(V2)], recalls: [recall(V2)] }),
      "take 01 (revert)",
      [],
    ],
    // 2.2: a recall of its target holds it, naming both
    [
      "revert in force, its to recalled",
      input({ revert: revert(V2, V1), recalls: [recall(V1)] }),
      "hold RevertTargetWithdrawn",
      [V1.version, V2.version, "recalled"],
    ],
    [
      "revert in force, its to revoked",
      input({ revert: revert(V2, V1), revoked: [revoked(V1), revoked(V2)] }),
      "hold RevertTargetWithdrawn",
      [V1.version, "revoked"],
    ],
    // 2.3: expiry while unreachable (the freeze attack)
    [
      "unreachable, not expired yet",
      input({ trust: { ...fresh, reachable: false } }),
      "take 02",
      [],
    ],
    [
      "unreachable, expired",
      input({ trust: { ...fresh, reachable: false, expiresAt: at(-1) } }),
      "hold TrustExpired",
      ["expired", "unreachable", V2.version],
    ],
    [
      "unreachable, expired within acceptExpiredSeconds",
      input({
        trust: { ...fresh, reachable: false, expiresAt: at(-60), acceptExpiredSeconds: 120 },
      }),
      "take 02",
      [],
    ],
    [
      "unreachable, expired past acceptExpiredSeconds",
      input({
        trust: { ...fresh, reachable: false, expiresAt: at(-180), acceptExpiredSeconds: 120 },
      }),
      "hold TrustExpired",
      ["acceptExpiredSeconds 120", "unreachable"],
    ],
    [
      "unreachable, expired, a revert in force waits",
      input({ revert: revert(V2, V1), trust: { ...fresh, reachable: false, expiresAt: at(-1) } }),
      "hold TrustExpired",
      ["waits", V1.version],
    ],
    [
      "unreachable, expired, recalled too: trust first",
      input({ recalls: [recall(V2)], trust: { ...fresh, reachable: false, expiresAt: at(-1) } }),
      "hold TrustExpired",
      [],
    ],
    [
      "reachable and expired: the TUF client refuses it (not this rule)",
      input({ trust: { ...fresh, expiresAt: at(-1) } }),
      "take 02",
      [],
    ],
    [
      "no clock (the agent's reading): expiry not judged",
      input({ now: undefined, trust: { ...fresh, reachable: false, expiresAt: at(-1) } }),
      "take 02",
      [],
    ],
    // trust refused
    [
      "metadata refused",
      input({
        trust: {
          ...fresh,
          vouches: false,
          refused: { reason: "SignatureThreshold", message: "m" },
        },
      }),
      "hold TrustRefused",
      ["SignatureThreshold"],
    ],
    [
      "metadata refused, a revert in force waits",
      input({
        revert: revert(V2, V1),
        trust: { ...fresh, refused: { reason: "ClockBehind", message: "m" } },
      }),
      "hold TrustRefused",
      ["waits"],
    ],
    // the floor the release a revert leaves declares (judged when a revert is decided: floor)
    [
      "revert, floor read, none declared",
      input({ revert: revert(V2, V1), floor: { kind: "read" } }),
      "take 01 (revert)",
      [],
    ],
    [
      "revert, floor at its target",
      input({ revert: revert(V2, V1), floor: { kind: "read", floor: V1.version } }),
      "take 01 (revert)",
      [],
    ],
    [
      "revert below the floor",
      input({ revert: revert(V3, V1), chosen: V3, floor: { kind: "read", floor: V2.version } }),
      "hold RevertBelowFloor",
      [V3.version, V1.version, `revertFloor ${V2.version}`, "Roll forward"],
    ],
    [
      "revert below the floor, by a person's request: still held (spec.version goes there)",
      input({
        revert: { ...revert(V3, V1), trigger: "Request", reason: "RevertedByRequest" },
        chosen: V3,
        via: "spec",
        trust: undefined,
        floor: { kind: "read", floor: V2.version },
      }),
      "hold RevertBelowFloor",
      [`revertFloor ${V2.version}`],
    ],
    [
      "revert, floor not read yet",
      input({ revert: revert(V2, V1), floor: { kind: "reading" } }),
      "hold RevertFloorUnread",
      ["reading the revert floor", V2.version, V1.version],
    ],
    [
      "revert, floor unreadable",
      input({ revert: revert(V2, V1), floor: { kind: "unread", message: "GET x: 404" } }),
      "hold RevertFloorUnread",
      ["could not be read (GET x: 404)", "nothing is reverted"],
    ],
    [
      "revert recorded, floor not judged (the agent; judged when decided)",
      input({ revert: revert(V3, V1), chosen: V3, now: undefined }),
      "take 01 (revert)",
      [],
    ],
    [
      "revert below the floor, its from recalled: the recall does not lift the floor",
      input({
        revert: revert(V3, V1),
        chosen: V3,
        recalls: [recall(V3)],
        floor: { kind: "read", floor: V2.version },
      }),
      "hold RevertBelowFloor",
      [`revertFloor ${V2.version}`],
    ],
    [
      "revert below the floor, its to recalled: withdrawn first (retargeted, then judged)",
      input({
        revert: revert(V3, V1),
        chosen: V3,
        recalls: [recall(V1)],
        floor: { kind: "read", floor: V2.version },
      }),
      "hold RevertTargetWithdrawn",
      [V1.version, "recalled"],
    ],
    [
      "revert within the floor, its to recalled",
      input({ revert: revert(V2, V1), recalls: [recall(V1)], floor: { kind: "read" } }),
      "hold RevertTargetWithdrawn",
      [V1.version],
    ],
    [
      "unrevoked: the revert cleared, the floor no longer applies",
      input({ chosen: V3, revert: undefined, floor: { kind: "read", floor: V3.version } }),
      "take 03",
      [],
    ],
    [
      "floor and trust refused: trust first, the revert waits",
      input({
        revert: revert(V2, V1),
        floor: { kind: "read", floor: V2.version },
        trust: { ...fresh, refused: { reason: "SignatureThreshold", message: "m" } },
      }),
      "hold TrustRefused",
      ["waits"],
    ],
    [
      "follow below taken with a floor read: BelowTaken (the floor is a revert's)",
      input({ chosen: V1, taken: V2, floor: { kind: "read", floor: V1.version } }),
      "hold BelowTaken",
      [V1.version, V2.version],
    ],
    // 2.4: never below the release taken
    ["the choice is the release taken", input({ taken: V2 }), "take 02", []],
    [
      "the choice is below the release taken (follow)",
      input({ chosen: V1, taken: V2 }),
      "hold BelowTaken",
      [V1.version, V2.version, "spec.version", "liken release channel add"],
    ],
    [
      "below taken, by spec.version (a person)",
      input({ chosen: V1, taken: V2, via: "spec" }),
      "take 01",
      [],
    ],
    [
      "below taken by a person's revert",
      input({ chosen: V2, taken: V2, revert: revert(V2, V1) }),
      "take 01 (revert)",
      [],
    ],
    [
      "the channel no longer names the release taken",
      input({
        trust: { ...fresh, vouches: false, verdict: { reason: "NotInChannel", message: "gone" } },
      }),
      "hold NotVouched",
      ["NotInChannel", "below"],
    ],
  ];
  it.each(rows)("%s", (_name, i, want, words) => {
    const d = decideRelease(i);
    expect(verdict(d)).toBe(want);
    if (d.kind === "hold") {
      for (const w of words) expect(d.hold.message).toContain(w);
      expect(d.hold.releases[0]).toEqual(i.chosen);
    }
  });

  it("a hold keeps the revert in force (it waits, it is not dropped)", () => {
    const d = decideRelease(input({ revert: revert(V2, V1), recalls: [recall(V1)] }));
    expect(d.kind === "hold" && d.revert?.to).toEqual(V1);
  });

  it("trustExpired: at the bound exactly is still trusted", () => {
    const t = { ...fresh, expiresAt: at(-120), acceptExpiredSeconds: 120 };
    expect(trustExpired(t, NOW)).toBe(false);
    expect(trustExpired(t, at(1))).toBe(true);
  });
});

describe("the clock the trust is judged on", () => {
  const api = at(-30);
  it.each([
    ["agrees with everything", NOW, at(-60), api, "ok"],
    ["first verification", NOW, undefined, api, "ok"],
    // 2.6: the last verification ran 2 h ahead; this clock agrees with the API server.
    ["the last check ran ahead, clock fixed", NOW, at(2 * HOUR), api, "ran-ahead"],
    ["behind the API server's stamps", at(-400 * 24 * HOUR), at(-60), api, "behind"],
    ["behind the last verification, no API stamp", NOW, at(2 * HOUR), undefined, "behind"],
    ["within the tolerance of the API stamp", at(-200), at(-60), api, "ok"],
  ] as const)("%s", (_n, now, verified, apiTime, kind) => {
    const v = clockVerdict(now, verified, apiTime);
    expect(v.kind).toBe(kind);
    if (v.kind === "ran-ahead") expect(v.message).not.toMatch(/fix/i);
    if (v.kind === "behind") expect(v.message).toContain("clock reads");
  });

  it("apiTimeOf: the latest of creationTimestamp and managedFields[].time", () => {
    const c = cluster();
    const meta = c.metadata as typeof c.metadata & { managedFields: { time?: string }[] };
    meta.creationTimestamp = "2026-11-01T00:00:00Z";
    meta.managedFields = [{ time: "2026-11-10T11:59:00Z" }, {}, { time: "2026-11-09T00:00:00Z" }];
    expect(apiTimeOf(c)?.toISOString()).toBe("2026-11-10T11:59:00.000Z");
    expect(apiTimeOf(cluster())).toBeUndefined();
  });
});

describe("what a person forgave", () => {
  const base = cluster();
  const r = { version: base.spec.version!, digest: base.spec.releases.catalog![1]!.digest };
  const f = (machine: string, when: string) => ({ machine, at: when });
  it.each([
    ["nothing forgiven", base, f("m1", "2026-11-10T10:00:00Z"), false],
    [
      "unrevoke after the failure",
      withSpec(base, { rollout: { unrevoke: { ...r, by: "alice", at: "2026-11-10T11:00:00Z" } } }),
      f("m1", "2026-11-10T10:00:00Z"),
      true,
    ],
    [
      "a failure after the unrevoke counts",
      withSpec(base, { rollout: { unrevoke: { ...r, by: "alice", at: "2026-11-10T11:00:00Z" } } }),
      f("m1", "2026-11-10T11:30:00Z"),
      false,
    ],
    [
      "an unrevoke of another release",
      withSpec(base, {
        rollout: {
          unrevoke: { version: "x", digest: r.digest, by: "a", at: "2026-11-10T11:00:00Z" },
        },
      }),
      f("m1", "2026-11-10T10:00:00Z"),
      false,
    ],
    [
      "resume --failed-release names the machine",
      withSpec(base, {
        rollout: {
          failedReleaseResume: { ...r, machines: ["m1"], by: "a", at: "2026-11-10T11:00:00Z" },
        },
      }),
      f("m1", "2026-11-10T10:00:00Z"),
      true,
    ],
    [
      "resume --failed-release, another machine",
      withSpec(base, {
        rollout: {
          failedReleaseResume: { ...r, machines: ["m1"], by: "a", at: "2026-11-10T11:00:00Z" },
        },
      }),
      f("m2", "2026-11-10T10:00:00Z"),
      false,
    ],
  ] as const)("%s", (_n, c, failure, want) => {
    expect(forgiven(c, r, failure)).toBe(want);
  });
});
