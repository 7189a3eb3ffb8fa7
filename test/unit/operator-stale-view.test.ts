// A channel read older than the one recorded is not written over it (src/operator/
// stale-view.ts): found by the simulator (seed 327: two copies, a revert by request, then a
// release published; the older read took status.trust.taken back down and dropped the revert).
import { describe, expect, it } from "vitest";
import type { Cluster, TrustStatus } from "../../src/api/index.js";
import { decide, type ChannelView } from "../../src/operator/decide/decide.js";
import { metadataVersion, staleChannelView } from "../../src/operator/channel/stale-view.js";
import {
  D2,
  D3,
  NOW,
  SETTINGS,
  V2,
  V3,
  cluster,
  iso,
  machine,
  observed,
  withSpec,
} from "./operator-fixtures.js";

const ROOT = `sha256:${"r".repeat(64)}`;
const ts = (v: number): string => JSON.stringify({ signed: { _type: "timestamp", version: v } });
const trust = (v: number, r: { version: string; digest: string }): TrustStatus => ({
  mode: "channel",
  rootDigest: ROOT,
  verifiedAt: iso(NOW, -v),
  expiresAt: iso(NOW, 3600),
  metadata: { root: "{}", timestamp: ts(v) },
  target: r,
  taken: r,
});
const following = (t: TrustStatus): Cluster =>
  withSpec(cluster({ version: null, status: { trust: t } }), {
    releases: {
      ...cluster().spec.releases,
      trust: { mode: "channel", channel: "stable", rootDigest: ROOT, follow: {} },
    },
  });
const view = (t: TrustStatus): ChannelView => ({
  channel: { lastCheckTime: iso(NOW) },
  condition: {
    type: "ChannelReachable",
    status: "True",
    reason: "ChannelRead",
    message: "read",
    lastTransitionTime: iso(NOW),
  },
  trust: {
    status: t,
    condition: {
      type: "ChannelTrusted",
      status: "True",
      reason: "MetadataVerified",
      message: "verified",
      lastTransitionTime: iso(NOW),
    },
  },
});

describe("a channel read older than the recorded one", () => {
  const rel3 = { version: V3, digest: D3 };
  const rel2 = { version: V2, digest: D2 };
  const ms = [machine("m1", { status: { version: V3, digest: D3, step: "Ready" } })];

  it.each([
    ["older timestamp version: stale", 7, 6, true],
    ["the same version: not stale", 7, 7, false],
    ["newer: not stale", 7, 8, false],
  ])("%s", (_name, recorded, read, want) => {
    const c = following(trust(recorded, rel3));
    expect(staleChannelView(c, trust(read, rel2))).toBe(want);
  });

  it("metadata without a version, or another root, is never judged stale", () => {
    expect(metadataVersion("not json")).toBeUndefined();
    expect(metadataVersion(JSON.stringify({ signed: {} }))).toBeUndefined();
    const c = following(trust(7, rel3));
    const other = { ...trust(6, rel2), rootDigest: `sha256:${"o".repeat(64)}` };
    expect(staleChannelView(c, other)).toBe(false);
  });

  it("is not written: the taken release and the target stay the newer read's", () => {
    const c = following(trust(7, rel3));
    const d = decide({ ...observed(c, ms), channel: view(trust(6, rel2)) }, SETTINGS);
    expect(d.status.trust?.taken).toEqual(rel3);
    expect(d.status.trust?.target).toEqual(rel3);
  });

  it("a newer read is written", () => {
    const c = following(trust(6, rel2));
    const d = decide({ ...observed(c, ms), channel: view(trust(7, rel3)) }, SETTINGS);
    expect(d.status.trust?.taken).toEqual(rel3);
  });
});
