import { describe, expect, it } from "vitest";
import type { Cluster } from "../../src/api/types.js";
import { recordingStep, settled, type RecordingPhase } from "../../src/cli/commands/timeline.js";
import {
  renderTimelineSvg,
  tickSeconds,
  timelineRows,
  type MachineAt,
  type TimelineSample,
} from "../../src/cli/views/timeline.js";

const V1 = "2026.10.10-001";
const V2 = "2026.10.12-001";
const m = (name: string, step: MachineAt["step"], version = V1, leader = false): MachineAt => ({
  name,
  leader,
  step,
  version,
});
const at = (t: number, machines: MachineAt[], turns: string[] = []): TimelineSample => ({
  at: t,
  machines,
  turns,
});

describe("timelineRows", () => {
  const rollout: TimelineSample[] = [
    at(0, [m("w1", "Ready"), m("l1", "Ready", V1, true)]),
    at(10, [m("w1", "Downloading"), m("l1", "Downloading", V1, true)]),
    at(30, [m("w1", "UpdatePending"), m("l1", "UpdatePending", V1, true)]),
    at(31, [m("w1", "Updating"), m("l1", "UpdatePending", V1, true)], ["w1"]),
    at(50, [m("w1", "Ready", V2), m("l1", "UpdatePending", V1, true)], ["w1"]),
    at(51, [m("w1", "Ready", V2), m("l1", "Updating", V1, true)], ["l1"]),
    at(80, [m("w1", "Ready", V2), m("l1", "Ready", V2, true)]),
  ];

  const cases: { name: string; samples: TimelineSample[]; end: number; want: unknown }[] = [
    {
      name: "each step is a span from the sample that began it to the next change; leaders first",
      samples: rollout,
      end: 90,
      want: [
        {
          machine: "l1",
          leader: true,
          steps: [
            { from: 0, to: 10, step: "Ready", version: V1 },
            { from: 10, to: 30, step: "Downloading", version: V1 },
            { from: 30, to: 51, step: "UpdatePending", version: V1 },
            { from: 51, to: 80, step: "Updating", version: V1 },
            { from: 80, to: 90, step: "Ready", version: V2 },
          ],
          turns: [{ from: 51, to: 80 }],
        },
        {
          machine: "w1",
          leader: false,
          steps: [
            { from: 0, to: 10, step: "Ready", version: V1 },
            { from: 10, to: 30, step: "Downloading", version: V1 },
            { from: 30, to: 31, step: "UpdatePending", version: V1 },
            { from: 31, to: 50, step: "Updating", version: V1 },
            { from: 50, to: 90, step: "Ready", version: V2 },
          ],
          turns: [{ from: 31, to: 51 }],
        },
      ],
    },
    {
      name: "samples out of order are put in order; a turn still held at the end stays open",
      samples: [at(5, [m("w1", "Updating")], ["w1"]), at(0, [m("w1", "UpdatePending")])],
      end: 9,
      want: [
        {
          machine: "w1",
          leader: false,
          steps: [
            { from: 0, to: 5, step: "UpdatePending", version: V1 },
            { from: 5, to: 9, step: "Updating", version: V1 },
          ],
          turns: [{ from: 5, to: 9 }],
        },
      ],
    },
    {
      name: "a new version in the same step begins a new span (the version is in each bar's tip)",
      samples: [at(0, [m("w1", "Ready")]), at(4, [m("w1", "Ready", V2)])],
      end: 6,
      want: [
        {
          machine: "w1",
          leader: false,
          steps: [
            { from: 0, to: 4, step: "Ready", version: V1 },
            { from: 4, to: 6, step: "Ready", version: V2 },
          ],
          turns: [],
        },
      ],
    },
    { name: "no samples, no rows", samples: [], end: 1, want: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(timelineRows(c.samples, c.end)).toEqual(c.want);
    });
  }
});

describe("renderTimelineSvg", () => {
  it("draws a row per machine, a bar per step, a turn mark (red for a leader) and the legend", () => {
    const rows = timelineRows(
      [
        at(0, [m("w1", "UpdatePending"), m("l1", "UpdatePending", V1, true)]),
        at(1000, [m("w1", "Updating"), m("l1", "UpdatePending", V1, true)], ["w1"]),
        at(3000, [m("w1", "Ready", V2), m("l1", "Updating", V1, true)], ["l1"]),
      ],
      4000,
    );
    const svg = renderTimelineSvg(rows, { title: "rollout <lab>", start: 0, end: 4000 });
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    expect(svg).toContain("rollout &lt;lab&gt;");
    expect(svg).toContain(">l1 (leader)</text>");
    expect(svg).toContain(">w1</text>");
    expect(svg.match(/<rect [^>]*height="14"/g)).toHaveLength(5);
    expect(svg).toContain("<title>w1: Updating on 2026.10.10-001, 2 s from 1 s</title>");
    expect(svg).toContain('fill="#b71c1c"><title>l1 held a reboot turn for 1 s (a leader down)');
    expect(svg).toContain('fill="#212121"><title>w1 held a reboot turn for 2 s</title>');
    expect(svg.trimEnd()).toMatch(/<\/svg>$/);
  });
});

describe("tickSeconds", () => {
  const cases: [number, number][] = [
    [0, 1],
    [8, 1],
    [30, 5],
    [100, 20],
    [600, 100],
    [3600, 500],
  ];
  for (const [span, tick] of cases)
    it(`${span} s -> a tick every ${tick} s`, () => {
      expect(tickSeconds(span)).toBe(tick);
    });
});

describe("settled", () => {
  const D1 = `sha256:${"1".repeat(64)}`;
  const D2 = `sha256:${"2".repeat(64)}`;
  const catalog = [
    { version: V1, digest: D1 },
    { version: V2, digest: D2 },
  ];
  const cluster = (phase: string, status: Partial<Cluster["status"]> = {}): Cluster =>
    ({
      metadata: { name: "lab" },
      spec: { version: V2, releases: { source: "http://x", catalog } },
      status: { phase, ...status },
    }) as Cluster;
  const reverting = (phase: string): Cluster =>
    cluster(phase, {
      revert: {
        from: { version: V2, digest: D2 },
        to: { version: V1, digest: D1 },
      },
    } as Partial<Cluster["status"]>);
  const cases: { name: string; c: Cluster | undefined; s: TimelineSample; want: boolean }[] = [
    {
      name: "all on the target, Ready",
      c: cluster("Ready"),
      s: at(0, [m("a", "Ready", V2)]),
      want: true,
    },
    {
      name: "a failed trial counts as settled",
      c: cluster("Ready"),
      s: at(0, [m("a", "Failed"), m("b", "Ready", V2)]),
      want: true,
    },
    {
      name: "one machine still on the old release",
      c: cluster("Ready"),
      s: at(0, [m("a", "Ready", V1)]),
      want: false,
    },
    {
      name: "a turn still held",
      c: cluster("Ready"),
      s: at(0, [m("a", "Ready", V2)], ["a"]),
      want: false,
    },
    {
      name: "the Cluster still Updating",
      c: cluster("Updating"),
      s: at(0, [m("a", "Ready", V2)]),
      want: false,
    },
    {
      name: "a revert: every machine back on the last good release",
      c: reverting("Ready"),
      s: at(0, [m("a", "Ready", V1), m("b", "Ready", V1)]),
      want: true,
    },
    {
      name: "a revert: a machine still on the reverted release",
      c: reverting("Ready"),
      s: at(0, [m("a", "Ready", V1), m("b", "Ready", V2)]),
      want: false,
    },
    { name: "no machines yet", c: cluster("Ready"), s: at(0, []), want: false },
    { name: "no Cluster", c: undefined, s: at(0, [m("a", "Ready", V2)]), want: false },
  ];
  for (const c of cases) it(c.name, () => expect(settled(c.c, c.s)).toBe(c.want));
});

describe("recordingStep: wait for the rollout to start, stop when it ends", () => {
  const run = (samples: { synced: boolean; settled: boolean }[]): RecordingPhase[] => {
    let p: RecordingPhase = "syncing";
    return samples.map((x) => (p = recordingStep(p, x)));
  };
  const S = { synced: true, settled: true };
  const U = { synced: true, settled: false };

  it.each([
    // The Cluster listed before its Machines looks unsettled: not a rollout (issue 42, item 4).
    [
      "a partial picture first, then a settled fleet",
      [{ synced: false, settled: false }, S, S],
      ["syncing", "waiting", "waiting"],
    ],
    ["a settled fleet, then the edit", [S, U, U, S], ["waiting", "moving", "moving", "done"]],
    ["started mid-rollout", [U, S], ["moving", "done"]],
    ["done stays done", [U, S, U], ["moving", "done", "done"]],
  ] as const)("%s", (_why, samples, want) => {
    expect(run([...samples])).toEqual(want);
  });
});
