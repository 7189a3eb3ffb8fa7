// A revert asked for after a recall, on a channel-mode Cluster that never read the recalled
// release as vouched (issue 48, defect 7): its trust status began after the recall (a switch from
// pinned mode, a new root pin, a status recreated), so nothing is taken and the decision has
// nothing chosen, while its machines still run the recalled release. The revert's `from` comes
// from what the Machines run (src/operator/revert/running.ts), for the CLI's request, the
// operator's decision and the target the agents read once it is recorded.
import { describe, expect, it } from "vitest";
import type { Cluster, Machine } from "../../src/api/types.js";
import { effectiveTarget, targetView } from "../../src/release-decision/view.js";
import { recalledRunning } from "../../src/operator/revert/running.js";
import { revertRequestOf } from "../../src/cli/commands/revert-request.js";
import { NOW, V1, V2, iso, machine, progressing } from "./operator-fixtures.js";
import {
  R1,
  R2,
  R3,
  asksFor,
  condition,
  following,
  granted,
  reverted,
  run,
} from "./release-fixtures.js";

const ALICE = { by: "alice", at: iso(NOW, -10) };
const on = (name: string, r: { version: string; digest: string }): Machine =>
  machine(name, { status: { ...r, step: "Ready" } });

/**
 * Channel mode, its trust status read only after the channel recalled `recalled`: no target,
 * nothing taken. Known good V2 over V1 (from the pinned mode it switched from). With
 * `follow` unset, spec.version names V2.
 */
function afterRecall(opts: { follow?: boolean; recalled?: typeof R2; known?: boolean } = {}) {
  const recalled = opts.recalled ?? R2;
  const c = following(
    {
      recalled: { version: recalled.version, reason: "kernel panics" },
      recalls: [{ ...recalled, reason: "kernel panics" }],
    },
    {
      ...(opts.known === false
        ? {}
        : {
            lastKnownGood: { ...R2, since: iso(NOW, -86_400) },
            priorKnownGood: { ...R1, since: iso(NOW, -172_800) },
          }),
      conditions: [condition("ChannelTrusted", "False", "ReleaseRecalled")],
    },
  );
  if (opts.follow !== true) {
    c.spec.version = V2;
    delete c.spec.releases.trust!.follow;
  }
  return c;
}
const fleet = (): Machine[] => [on("m1", R2), on("m2", R2)];
const asked = (c: Cluster): Cluster => {
  const revertRequest = revertRequestOf(c, fleet(), ALICE).request;
  return { ...c, spec: { ...c.spec, rollout: { ...c.spec.rollout, revertRequest } } };
};

describe("a revert of a recalled release the Cluster never took", () => {
  it("before: nothing chosen, no turn, and the Cluster says so", () => {
    const c = afterRecall();
    expect(targetView(c).kind).toBe("none");
    const d = run(c, fleet());
    expect(d.grants).toEqual([]);
    expect(progressing(d)).toMatchObject({ status: "False", reason: "NoTarget" });
  });

  it("`liken rollout revert` names the recalled release its Machines run", () => {
    const ask = revertRequestOf(afterRecall(), fleet(), ALICE);
    expect(ask.request).toMatchObject({ ...R2, by: "alice" });
    expect(ask.to).toMatchObject(R1);
  });

  it.each([
    ["spec.version names it", {}],
    ["follow, the channel's only release recalled", { follow: true }],
  ])("%s: the operator starts the revert, and the agents then read its target", (_n, o) => {
    const d = run(asked(afterRecall(o)), fleet());
    expect(d.revertStarted).toMatchObject({ from: R2, to: R1, trigger: "Request" });
    expect(reverted(d)).toMatchObject({ status: "True", reason: "RevertedByRequest" });
    expect(d.status.revokedReleases?.map((r) => r.version)).toEqual([V2]);
    // Recorded: the agents' reading (no clock) and the operator's both go to V1.
    const recorded: Cluster = { ...asked(afterRecall(o)), status: d.status };
    expect(targetView(recorded)).toMatchObject({ kind: "revert", target: R1, from: R2 });
    expect(effectiveTarget(recorded, NOW)).toEqual(R1);
    const next = run(recorded, [on("m1", R1), asksFor("m2", R2, R1)]);
    expect(granted(next)).toEqual([`m2->${V1}`]);
    expect(reverted(next)).toMatchObject({ status: "True" });
  });

  it("the newest recalled release a Machine runs, the recall's digest", () => {
    const c = afterRecall({ follow: true });
    const noDigest = on("m3", R2);
    delete noDigest.status!.digest;
    expect(recalledRunning(c, [on("m1", R1), noDigest])).toEqual(R2);
    expect(recalledRunning(c, [on("m1", R1)])).toBeUndefined();
    // Another build of the recalled version is not the one recalled.
    expect(recalledRunning(c, [on("m1", { ...R2, digest: R3.digest })])).toBeUndefined();
  });

  it("not when the Machines run no recalled release: refused, and a request written anyway does nothing", () => {
    const c = afterRecall({ recalled: R3 });
    expect(() => revertRequestOf(c, fleet(), ALICE)).toThrow(
      expect.objectContaining({ code: "LIKEN_OPERATOR_USAGE" }),
    );
    const written = { ...c, spec: { ...c.spec, rollout: { revertRequest: { ...R2, ...ALICE } } } };
    expect(run(written, fleet()).revertStarted).toBeUndefined();
  });

  it("not on a trust status made from another root, nor in pinned mode", () => {
    const other = afterRecall();
    other.status!.trust!.rootDigest = `sha256:${"e".repeat(64)}`;
    expect(recalledRunning(other, fleet())).toBeUndefined();
    const pinned = afterRecall();
    pinned.spec.releases.trust = { mode: "pinned" };
    expect(recalledRunning(pinned, fleet())).toBeUndefined();
  });

  it("a recreated Cluster knows no good release: refused, saying what to do", () => {
    expect(() => revertRequestOf(afterRecall({ known: false }), fleet(), ALICE)).toThrow(
      expect.objectContaining({ code: "LIKEN_OPERATOR_NO_KNOWN_GOOD" }),
    );
  });
});
