// The Cluster status fields that grow with the fleet stay within the CRD's bounds where they
// are made: the TURNS string on a wide budget, the turn list itself, the stalled message with
// many stalled turns, the handled check-releases value. The API server's side (a status at
// these limits is accepted) is test/integration/operator-bounds.test.ts.
import { describe, expect, it } from "vitest";
import { CLUSTER_STATUS_BOUNDS, maxItemsOf, maxLengthOf } from "../../src/api/bounds.js";
import { ANNOTATION_CHECK_RELEASES, type Cluster } from "../../src/api/index.js";
import { handledForm, pollDue } from "../../src/operator/channel/poll.js";
import { decide } from "../../src/operator/decide/decide.js";
import { failedList } from "../../src/operator/turns/brake.js";
import {
  asking,
  back,
  cluster,
  GRANTED,
  iso,
  NOW,
  observed,
  SETTINGS,
  turn,
} from "./operator-fixtures.js";

const TURNS_MAX = maxLengthOf(CLUSTER_STATUS_BOUNDS, "turns");
const MESSAGE_MAX = maxLengthOf(CLUSTER_STATUS_BOUNDS, "conditions[].message");
const TURNS_MAX_ITEMS = maxItemsOf(CLUSTER_STATUS_BOUNDS, "rebootTurns");

/** A Machine name as long as Kubernetes allows (253), unique by its number. */
const longName = (i: number): string => `m${String(i).padStart(4, "0")}-${"x".repeat(247)}`;

const brakeOff = (c: Cluster): Cluster => ({
  ...c,
  spec: { ...c.spec, rollout: { ...c.spec.rollout, maxFailedTrials: 0 } },
});

describe("Cluster status fields that grow with the fleet", () => {
  it("TURNS names as many turns as fit in its 4096 characters, then how many more", () => {
    const ms = Array.from({ length: 40 }, (_, i) => asking(longName(i)));
    const d = decide(observed(brakeOff(cluster({ maxUnavailable: "100%" })), ms), SETTINGS);
    expect(d.grants).toHaveLength(40);
    expect(d.status.rebootTurns).toHaveLength(40);
    expect(d.status.turns!.length).toBeLessThanOrEqual(TURNS_MAX);
    expect(d.status.turns).toMatch(/,… and 24 more$/);
    expect(d.cut).toEqual([]);
  });

  it("grants no more turns than status.rebootTurns holds, whatever the budget", () => {
    const n = TURNS_MAX_ITEMS + 6;
    const ms = Array.from({ length: n }, (_, i) => asking(`m${i}`));
    const d = decide(observed(brakeOff(cluster({ maxUnavailable: "100%" })), ms), SETTINGS);
    expect(d.grants).toHaveLength(TURNS_MAX_ITEMS);
    expect(d.status.rebootTurns).toHaveLength(TURNS_MAX_ITEMS);
    expect(d.budget.text).toContain(`capped at ${TURNS_MAX_ITEMS}`);
    expect(d.cut).toEqual([]);
  });

  it("the stalled message names what fits and keeps the way out whole", () => {
    const stalledAt = iso(NOW, -1);
    const turns = Array.from({ length: 300 }, (_, i) =>
      turn(longName(i), { stalledAt, deadline: stalledAt, grantedAt: GRANTED }),
    );
    const ms = turns.map((t) =>
      asking(t.machine, {
        status: {
          step: "Updating",
          updateStage: "Draining",
          drainBlocker: { pod: "ns/p", since: GRANTED, message: "m".repeat(4096) },
        },
      }),
    );
    const c = brakeOff(cluster({ maxUnavailable: "100%", turns }));
    const d = decide(observed(c, ms), SETTINGS);
    const p = d.status.conditions?.find((x) => x.type === "Progressing");
    expect(p?.reason).toBe("RolloutStalled");
    expect(p!.message.length).toBeLessThanOrEqual(MESSAGE_MAX);
    expect(p!.message).toMatch(/… and \d+ more No more turns until a person examines it/);
    expect(p!.message).toContain(`liken rollout resume lab ${longName(0)} --reason`);
    expect(d.cut).toEqual([]);
  });

  it("a check-releases value longer than the status holds is recorded as its digest", () => {
    const long = "r".repeat(5000);
    expect(handledForm("2026-12-04")).toBe("2026-12-04");
    expect(handledForm(long)).toMatch(/^sha256:[0-9a-f]{64}$/);
    const c = cluster();
    c.metadata.annotations = { [ANNOTATION_CHECK_RELEASES]: long };
    const polled = { lastPollAt: NOW };
    expect(pollDue(c, polled, NOW, 60_000)).toEqual({ due: true, why: "annotation" });
    c.status = { ...c.status, channel: { handledCheckReleases: handledForm(long) } };
    expect(pollDue(c, polled, NOW, 60_000)).toEqual({ due: false, why: "none" });
  });

  it("a status the makers left over its bounds is cut by the last guard and says where", () => {
    const c = cluster({ status: { endpoint: `https://${"e".repeat(3000)}` } });
    const d = decide(observed(c, [asking("m1")]), { ...SETTINGS, endpoint: undefined });
    // The endpoint kept from before (the summary writes it only when configured).
    expect(d.status.endpoint?.length ?? 0).toBeLessThanOrEqual(2048);
    expect(d.cut).toEqual(["endpoint"]);
  });

  it("ten failed trials with whole 4096-character messages leave the condition room", () => {
    const failed = Array.from({ length: 12 }, (_, i) => ({
      machine: longName(i),
      reason: "SlotCheckMismatch",
      message: "q".repeat(4096),
      at: GRANTED,
    }));
    const text = failedList(failed);
    expect(text.length).toBeLessThan(MESSAGE_MAX / 4);
    expect(text).toMatch(/ and 2 more$/);
  });

  it("many machines soaking at once still leave the Progressing message within its bound", () => {
    const returnedAt = iso(NOW, -5);
    const turns = Array.from({ length: 400 }, (_, i) =>
      turn(longName(i), { grantedAt: GRANTED, returnedAt }),
    );
    // Half of them soak; the others still hold their turns, so the rollout is in progress.
    const ms = turns.map((t, i) => (i % 2 === 0 ? back(t.machine) : asking(t.machine)));
    for (const [i, t] of turns.entries()) if (i % 2 === 1) delete t.returnedAt;
    const c = brakeOff(cluster({ maxUnavailable: "100%", turns }));
    c.spec.rollout = { ...c.spec.rollout, soakSeconds: 600 };
    const d = decide(observed(c, ms), SETTINGS);
    const p = d.status.conditions?.find((x) => x.type === "Progressing");
    expect(p?.message).toContain("back and soaking");
    expect(p!.message.length).toBeLessThanOrEqual(MESSAGE_MAX);
    expect(d.cut).toEqual([]);
  });
});
