// A picture of a rollout: one row per machine, its steps over time as coloured bars, the
// time it held a reboot turn marked beneath them, leaders named, so a person sees at a glance
// where the time went. Pure: samples in (what a watch of the Cluster and its Machines saw, each
// at an instant), rows and an SVG document out. `liken status CLUSTER --timeline FILE` and the
// lab's demo record the samples; docs/timeline.md explains how to read the picture.
import type { Cluster, Machine, MachineStep } from "../../api/types.js";

export interface MachineAt {
  name: string;
  leader: boolean;
  step: MachineStep | "Unknown";
  version?: string;
}

/** The fleet of one Cluster as seen at one instant (ms since the epoch). */
export interface TimelineSample {
  at: number;
  machines: MachineAt[];
  /** Machines that hold a reboot turn (status.rebootTurns). */
  turns: string[];
}

export function sampleOf(
  cluster: Cluster | undefined,
  machines: readonly Machine[],
  at: number,
): TimelineSample {
  const name = cluster?.metadata.name;
  return {
    at,
    machines: machines
      .filter((m) => m.spec.cluster === name)
      .map((m) => ({
        name: m.metadata.name,
        leader: m.spec.role === "Leader",
        step: m.status?.step ?? "Unknown",
        ...(m.status?.version === undefined ? {} : { version: m.status.version }),
      })),
    turns: (cluster?.status?.rebootTurns ?? []).map((t) => t.machine),
  };
}

export interface Span {
  from: number;
  to: number;
}

export interface StepSpan extends Span {
  step: MachineAt["step"];
  version?: string;
}

export interface TimelineRow {
  machine: string;
  leader: boolean;
  steps: StepSpan[];
  turns: Span[];
}

/**
 * Rows from samples in time order: a span lasts from the sample that began it to the next
 * change (or `end`). A machine missing from a sample keeps its last span open (a watch sends
 * only changes). Rows are sorted by name, leaders first, as `kubectl get machines` lists them.
 */
export function timelineRows(samples: readonly TimelineSample[], end: number): TimelineRow[] {
  const rows = new Map<string, TimelineRow>();
  const ordered = [...samples].sort((a, b) => a.at - b.at);
  for (const s of ordered) {
    for (const m of s.machines) {
      let row = rows.get(m.name);
      if (row === undefined) {
        row = { machine: m.name, leader: m.leader, steps: [], turns: [] };
        rows.set(m.name, row);
      }
      const last = row.steps[row.steps.length - 1];
      if (last === undefined || last.step !== m.step || last.version !== m.version) {
        if (last !== undefined) last.to = s.at;
        row.steps.push({
          from: s.at,
          to: end,
          step: m.step,
          ...(m.version === undefined ? {} : { version: m.version }),
        });
      }
    }
    for (const row of rows.values()) {
      const holds = s.turns.includes(row.machine);
      const open = row.turns[row.turns.length - 1];
      const isOpen = open !== undefined && open.to === end;
      if (holds && !isOpen) row.turns.push({ from: s.at, to: end });
      if (!holds && isOpen) open.to = s.at;
    }
  }
  return [...rows.values()].sort(
    (a, b) => Number(b.leader) - Number(a.leader) || a.machine.localeCompare(b.machine),
  );
}

/** One colour per step; the legend lists them in this order. */
export const STEP_COLOURS: Readonly<Record<MachineAt["step"], string>> = {
  Ready: "#9ccc65",
  Downloading: "#42a5f5",
  UpdatePending: "#ffee58",
  RebootPending: "#ffca28",
  Updating: "#ff7043",
  Failed: "#d32f2f",
  Lost: "#424242",
  Unknown: "#e0e0e0",
};

const LABEL_W = 190;
const PLOT_W = 900;
const ROW_H = 26;
const BAR_H = 14;
const TOP = 48;

const esc = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/**
 * A tick step (s) that gives about 4 to 8 ticks over `seconds`: 1, 2, 5 times a power of ten,
 * never under 1 s (a rollout is never that short, and the labels stay whole seconds).
 */
export function tickSeconds(seconds: number): number {
  const raw = Math.max(seconds, 8) / 8;
  const p = 10 ** Math.floor(Math.log10(raw));
  const m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

const secondsText = (s: number): string =>
  s >= 120 ? `${Math.round(s / 60)} min` : `${Number(s.toFixed(1))} s`;

/** The SVG document: a title, a time axis from `start`, one row per machine, a legend. */
export function renderTimelineSvg(
  rows: readonly TimelineRow[],
  o: { title: string; start: number; end: number },
): string {
  const span = Math.max(o.end - o.start, 1);
  const x = (t: number): number => LABEL_W + ((t - o.start) / span) * PLOT_W;
  const height = TOP + rows.length * ROW_H + 60;
  const width = LABEL_W + PLOT_W + 20;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="8" y="18" font-size="14" font-weight="bold">${esc(o.title)}</text>`,
  ];
  const tick = tickSeconds(span / 1000);
  for (let s = 0; s * 1000 <= span; s += tick) {
    const tx = x(o.start + s * 1000).toFixed(1);
    out.push(
      `<line x1="${tx}" y1="${TOP - 8}" x2="${tx}" y2="${TOP + rows.length * ROW_H}" stroke="#eeeeee"/>`,
      `<text x="${tx}" y="${TOP - 12}" text-anchor="middle" fill="#616161">${secondsText(s)}</text>`,
    );
  }
  rows.forEach((r, i) => {
    const y = TOP + i * ROW_H;
    const label = r.leader ? `${r.machine} (leader)` : r.machine;
    out.push(`<text x="8" y="${y + BAR_H - 2}">${esc(label)}</text>`);
    for (const s of r.steps) {
      const w = Math.max(x(s.to) - x(s.from), 0.5);
      const tip = `${r.machine}: ${s.step}${s.version ? ` on ${s.version}` : ""}, ${secondsText((s.to - s.from) / 1000)} from ${secondsText((s.from - o.start) / 1000)}`;
      out.push(
        `<rect x="${x(s.from).toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${BAR_H}" fill="${STEP_COLOURS[s.step]}"><title>${esc(tip)}</title></rect>`,
      );
    }
    for (const t of r.turns) {
      const w = Math.max(x(t.to) - x(t.from), 0.5);
      // A leader's turn in red: only one leader may be down at a time, and this shows when.
      const colour = r.leader ? "#b71c1c" : "#212121";
      const tip = `${r.machine} held a reboot turn for ${secondsText((t.to - t.from) / 1000)}${r.leader ? " (a leader down)" : ""}`;
      out.push(
        `<rect x="${x(t.from).toFixed(1)}" y="${y + BAR_H + 2}" width="${w.toFixed(1)}" height="4" fill="${colour}"><title>${esc(tip)}</title></rect>`,
      );
    }
  });
  let lx = 8;
  const ly = TOP + rows.length * ROW_H + 24;
  for (const [step, colour] of Object.entries(STEP_COLOURS)) {
    out.push(
      `<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${colour}"/>`,
      `<text x="${lx + 16}" y="${ly}">${step}</text>`,
    );
    lx += 22 + step.length * 7;
  }
  out.push(
    `<rect x="${lx}" y="${ly - 6}" width="24" height="4" fill="#212121"/>`,
    `<text x="${lx + 30}" y="${ly}">reboot turn</text>`,
    `<rect x="${lx + 110}" y="${ly - 6}" width="24" height="4" fill="#b71c1c"/>`,
    `<text x="${lx + 140}" y="${ly}">a leader's turn (leader down)</text>`,
    `</svg>`,
  );
  return `${out.join("\n")}\n`;
}
