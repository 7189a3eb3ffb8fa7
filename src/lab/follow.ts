// `npm run lab -- --follow`: the lab's fleet follows a signed channel, scripted. The lab's
// channel is signed with `liken release sign` (init, add), the Cluster is switched to trust
// mode channel with follow, a replayed channel is refused (ChannelTrusted=False, the fleet does
// not move), then a new release is published and the Cluster takes it by itself: every machine
// rolls, Manual ones approved as they ask.
import { cp, rm } from "node:fs/promises";
import path from "node:path";
import { ANNOTATION_CHECK_RELEASES, type Cluster, type FollowSpec } from "../api/types.js";
import { addRelease, initChannel, refreshChannel, tufDir } from "../release/tuf.js";
import { LAB_CLUSTER, type Lab } from "./lab.js";
import { RolloutObserver } from "./observer.js";
import { LAB_DIR } from "./paths.js";
import { until, watchRollout } from "./demo.js";

/** Signing, one refusal and a 5-machine rollout fit well within this on 2 cores. */
const FOLLOW_DEADLINE_MS = 6 * 60_000;

const trustOf = (c: Cluster) => c.status?.conditions?.find((x) => x.type === "ChannelTrusted");

/**
 * The patch a person applies to make a Cluster follow the signed `channel`: spec.version goes
 * (null removes it in a merge patch), and follow picks the release.
 */
export function followPatch(
  channel: string,
  rootDigest: string,
  follow: FollowSpec = {},
): Partial<Cluster> {
  return {
    spec: { version: null, releases: { trust: { mode: "channel", channel, rootDigest, follow } } },
  } as unknown as Partial<Cluster>;
}

export async function runFollow(lab: Lab, log: (l: string) => void): Promise<string> {
  const started = Date.now();
  const deadline = started + FOLLOW_DEADLINE_MS;
  const [current, next] = lab.releases;
  if (current === undefined || next === undefined) throw new Error("the lab has two releases");
  const repo = lab.channelDir;
  const keys = path.join(LAB_DIR, "lab", "keys");
  const check = () =>
    lab.api.clusters.patch(LAB_CLUSTER, {
      metadata: { annotations: { [ANNOTATION_CHECK_RELEASES]: new Date().toISOString() } },
    });
  const verdict = (what: string, ok: (c: Cluster) => boolean) =>
    until(what, deadline, async () => {
      const c = await lab.api.clusters.get(LAB_CLUSTER);
      return ok(c) ? c : undefined;
    });

  // 1. Sign the channel and publish the running release in it.
  const { rootDigest } = await initChannel({ repo, keys });
  await addRelease({ repo, keys, channel: "stable", version: current.version });
  log(`follow: liken release sign init --repo ${repo} --keys ${keys}: rootDigest ${rootDigest}`);
  log(`follow: liken release sign add --version ${current.version} --channel stable`);

  // 2. The Cluster trusts the channel and follows it (spec.version goes: follow picks).
  log("follow: kubectl patch cluster: spec.releases.trust {mode: channel, follow: {}}");
  await lab.api.clusters.patch(LAB_CLUSTER, followPatch("stable", rootDigest));
  await check();
  await verdict(`ChannelTrusted True with target ${current.version}`, (c) => {
    return trustOf(c)?.status === "True" && c.status?.trust?.target?.version === current.version;
  });
  log(`follow: ChannelTrusted True, target ${current.version}`);

  // 3. A replayed channel: the old metadata served again after a newer one was trusted.
  const old = path.join(LAB_DIR, "lab", "tuf-old");
  const now = path.join(LAB_DIR, "lab", "tuf-now");
  await cp(tufDir(repo), old, { recursive: true });
  await refreshChannel({ repo, keys });
  const before = (await lab.api.clusters.get(LAB_CLUSTER)).status?.trust?.verifiedAt;
  await check();
  await verdict("the refreshed metadata trusted", (c) => c.status?.trust?.verifiedAt !== before);
  await cp(tufDir(repo), now, { recursive: true });
  await rm(tufDir(repo), { recursive: true });
  await cp(old, tufDir(repo), { recursive: true });
  await check();
  const refused = await verdict(
    "ChannelTrusted False on the replay",
    (c) => trustOf(c)?.status === "False",
  );
  log(
    `follow: a replayed channel: ChannelTrusted False ${trustOf(refused)?.reason}: ${trustOf(refused)?.message}`,
  );
  await rm(tufDir(repo), { recursive: true });
  await cp(now, tufDir(repo), { recursive: true });

  // 4. A new release in the channel: the Cluster takes it by itself, every machine rolls.
  await addRelease({ repo, keys, channel: "stable", version: next.version });
  log(`follow: liken release sign add --version ${next.version} --channel stable`);
  const observer = new RolloutObserver(lab.api, LAB_CLUSTER);
  await observer.start();
  try {
    await check();
    await verdict(
      `the Cluster takes ${next.version}`,
      (c) => c.status?.trust?.target?.version === next.version,
    );
    log(`follow: ChannelTrusted True, target ${next.version}: the rollout begins`);
    await watchRollout(lab, observer, next.version, deadline, log);
  } finally {
    observer.stop();
  }
  const n = lab.fleet.length;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  return `lab: the fleet followed the signed channel to ${next.version}: ${n}/${n} machines, max turns in flight ${observer.maxTurns}, max leaders down ${observer.maxLeadersDown}, ${seconds} s`;
}
