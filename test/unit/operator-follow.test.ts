// follow.ts: which release of a signed channel a Cluster takes (table tests).
import { describe, expect, it } from "vitest";
import {
  decideFollow,
  opensAt,
  wavePosition,
  type FollowInput,
} from "../../src/operator/channel/follow.js";
import type { ChannelRelease } from "../../src/verify/tuf-target.js";

const T0 = new Date("2026-11-01T00:00:00Z");
const H = 3600_000;
const rel = (
  version: string,
  addedH: number,
  extra: Partial<ChannelRelease> = {},
): ChannelRelease => ({
  channel: "stable",
  version,
  digest: `sha256:${version.replace(/\D/g, "").padStart(64, "0")}`,
  length: 100,
  addedAt: new Date(T0.getTime() + addedH * H),
  path: `stable/${version}/release.yaml`,
  ...extra,
});
const V1 = rel("2026.11.01-001", 0);
const V2 = rel("2026.11.02-001", 24);
const V3 = rel("2026.11.03-001", 48);
const base = (o: Partial<FollowInput>): FollowInput => ({
  releases: [V1, V2, V3],
  current: undefined,
  version: undefined,
  follow: {},
  uid: "uid-a",
  now: new Date(T0.getTime() + 100 * H),
  ...o,
});
const ref = (r: ChannelRelease) => ({ version: r.version, digest: r.digest });

describe("decideFollow", () => {
  it.each([
    ["the newest, all waves open", base({}), V3.version],
    [
      "not before the delay",
      base({ follow: { delaySeconds: 60 * 3600 }, now: new Date(T0.getTime() + 100 * H) }),
      V2.version,
    ],
    ["nothing within the delay", base({ follow: { delaySeconds: 200 * 3600 } }), undefined],
    [
      "never a recalled release",
      base({ releases: [V1, V2, { ...V3, recalled: { at: "x", reason: "r" } }] }),
      V2.version,
    ],
    [
      "never older than the current (no downgrade by following)",
      base({ releases: [V1, V2], current: ref(V2), follow: { delaySeconds: 1000 * 3600 } }),
      V2.version,
    ],
    [
      "ordered by version, not by when added",
      base({ releases: [rel("2026.11.09-001", 0), rel("2026.11.10-001", -10)] }),
      "2026.11.10-001",
    ],
    [
      "the revert's skip hook leaves a release out",
      base({ skip: (r) => r.version === V3.version }),
      V2.version,
    ],
    [
      "spec.version names the release",
      base({ follow: undefined, version: V1.version }),
      V1.version,
    ],
  ] as const)("%s", (_name, input, want) => {
    expect(decideFollow(input).target?.version).toBe(want);
  });

  it("the current release recalled: no target, and it says why", () => {
    const d = decideFollow(
      base({
        releases: [V1, { ...V2, recalled: { at: "t", reason: "boot loop" } }],
        current: ref(V2),
      }),
    );
    expect(d.target).toBeUndefined();
    expect(d.recalled).toEqual({ version: V2.version, reason: "boot loop" });
    expect(d.fault?.reason).toBe("ReleaseRecalled");
    expect(d.fault?.message).toContain("boot loop");
  });

  it("spec.version not in the channel, or recalled: a fault, no target", () => {
    expect(decideFollow(base({ follow: undefined, version: "9.9" })).fault?.reason).toBe(
      "NotInChannel",
    );
    const r = decideFollow(
      base({
        follow: undefined,
        version: V3.version,
        releases: [{ ...V3, recalled: { at: "t", reason: "x" } }],
      }),
    );
    expect(r.fault?.reason).toBe("ReleaseRecalled");
    expect(r.target).toBeUndefined();
  });

  it("waves: a position per UID in [0, 1), spread; the release's own wave setting wins", () => {
    const ps = Array.from({ length: 1000 }, (_, i) => wavePosition(`uid-${i}`));
    expect(Math.min(...ps)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...ps)).toBeLessThan(1);
    // 1000 clusters over 10 hourly waves: each hour gets a tenth, give or take.
    const perHour = Array.from(
      { length: 10 },
      (_, h) => ps.filter((p) => p >= h / 10 && p < (h + 1) / 10).length,
    );
    for (const n of perHour) expect(n).toBeGreaterThan(60);
    const p = 0.5;
    expect(opensAt(V2, { waveSeconds: 3600 }, p).getTime() - V2.addedAt.getTime()).toBe(1800_000);
    expect(
      opensAt({ ...V2, waveSeconds: 7200 }, { waveSeconds: 3600, delaySeconds: 60 }, p).getTime() -
        V2.addedAt.getTime(),
    ).toBe(60_000 + 3600_000);
  });

  it("waiting for its wave: the target stays, and the time the wave opens is given", () => {
    const uid = "uid-late";
    const pos = wavePosition(uid);
    const now = new Date(V3.addedAt.getTime() + (pos * 10 * 3600 - 60) * 1000);
    const d = decideFollow(
      base({ uid, now, current: ref(V2), follow: { waveSeconds: 10 * 3600 } }),
    );
    expect(d.target?.version).toBe(V2.version);
    expect(d.waveOpensAt?.getTime()).toBe(opensAt(V3, { waveSeconds: 10 * 3600 }, pos).getTime());
  });
});
