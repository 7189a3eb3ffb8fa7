// The machine scenario's proof that a trial was promoted only after its Node showed the trial
// boot Ready (test/qemu/rejoin-proof.ts), on hand-made sights of the Node: each row breaks it.
import { describe, expect, it } from "vitest";
import type { NodeSight } from "../qemu/node-watch.js";
import { rejoinProof } from "../qemu/rejoin-proof.js";

const T = (s: string): number => Date.parse(`2026-12-04T08:${s}Z`);
const OLD = "11111111-1111-4111-8111-111111111111";
const NEW = "22222222-2222-4222-8222-222222222222";
const sight = (bootId: string, ready: string, at?: string): NodeSight => ({
  ms: 0,
  bootId,
  ready,
  ...(at === undefined ? {} : { heartbeatAt: T(at) }),
});

const ROWS: { name: string; sights: NodeSight[]; promotedAt?: string; problem?: RegExp }[] = [
  {
    name: "the trial boot's id Ready before the promotion",
    sights: [
      sight(OLD, "True", "00:00"),
      sight(NEW, "False", "01:00"),
      sight(NEW, "True", "01:05"),
    ],
    promotedAt: "2026-12-04T08:01:09Z",
  },
  {
    name: "the same second (whole seconds on both sides)",
    sights: [sight(OLD, "True", "00:00"), sight(NEW, "True", "01:10")],
    promotedAt: "2026-12-04T08:01:09Z",
  },
  {
    name: "promoted on the old boot's Ready (no new id ever shown)",
    sights: [sight(OLD, "True", "00:00")],
    promotedAt: "2026-12-04T08:01:09Z",
    problem: /the trial boot's is not new/,
  },
  {
    name: "the new id Ready only after the promotion",
    sights: [sight(OLD, "True", "00:00"), sight(NEW, "True", "01:20")],
    promotedAt: "2026-12-04T08:01:09Z",
    problem: /before the Node's first Ready of the trial boot/,
  },
  {
    name: "the new id never Ready",
    sights: [sight(OLD, "True", "00:00"), sight(NEW, "False", "01:00")],
    promotedAt: "2026-12-04T08:01:09Z",
    problem: /no Ready heartbeat of boot/,
  },
  {
    name: "no promotion recorded",
    sights: [sight(OLD, "True", "00:00"), sight(NEW, "True", "01:00")],
    problem: /no lastTrial.at/,
  },
];

describe("rejoinProof", () => {
  it.each(ROWS)("$name", ({ sights, promotedAt, problem }) => {
    const r = rejoinProof(sights, promotedAt);
    if (problem === undefined) expect(r).toMatchObject({ ok: true });
    else expect(r).toMatchObject({ ok: false, problem: expect.stringMatching(problem) });
  });
});
