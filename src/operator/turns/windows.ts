// Maintenance windows, pure: is a window of spec.disruption.windows open at an instant, and
// when does the next one open. Turns are granted only inside a window; downloads and staging
// go on outside them (they do not disturb a workload).
//
// Time zones come from the runtime's IANA database through Intl (no hand-kept offsets). A
// window opens at its wall-clock start on each of its days, in its time zone, and stays open
// for its duration as elapsed time: "02:00 for 4h" closes four real hours later even across
// a DST change. Two edges of DST have to be chosen, and this is the choice:
//   - a start that does not exist that day (inside a spring-forward gap, e.g. 02:30 in
//     Europe/Berlin on the last Sunday of March) opens when the clocks jump, as much later
//     as the gap is long (03:30 local);
//   - a start that exists twice (in a fall-back hour) opens at its first occurrence.
import {
  WEEKDAYS,
  WINDOW_DURATION_PATTERN,
  WINDOW_START_PATTERN,
  type Cluster,
  type ClusterCondition,
  type MaintenanceWindow,
  type Weekday,
} from "../../api/index.js";
import { rfc3339 } from "../../api/time.js";

/** The longest window: a week (a longer one is always open; the API refuses it too). */
export const WINDOW_MAX_MINUTES = 7 * 24 * 60;

export type WindowState =
  /** No window is configured: always open. */
  | { kind: "always" }
  | { kind: "open"; closesAt: Date; window: MaintenanceWindow }
  /** next is undefined when no window can open (every one has an unknown time zone). */
  | { kind: "closed"; next?: { at: Date; window: MaintenanceWindow } };

/** What is wrong with one window, for the SpecValid condition (the API checks the rest). */
export interface WindowProblem {
  index: number;
  message: string;
}

interface Parsed {
  window: MaintenanceWindow;
  tz: string;
  days: ReadonlySet<number>;
  startMinutes: number;
  durationMs: number;
}

export function windowProblems(windows: readonly MaintenanceWindow[] | undefined): WindowProblem[] {
  const problems: WindowProblem[] = [];
  (windows ?? []).forEach((w, index) => {
    const r = parse(w);
    if (typeof r === "string") problems.push({ index, message: r });
  });
  return problems;
}

export function windowState(
  windows: readonly MaintenanceWindow[] | undefined,
  now: Date,
): WindowState {
  if (windows === undefined || windows.length === 0) return { kind: "always" };
  let open: { closesAt: Date; window: MaintenanceWindow } | undefined;
  let next: { at: Date; window: MaintenanceWindow } | undefined;
  for (const w of windows) {
    const p = parse(w);
    if (typeof p === "string") continue; // reported by windowProblems; never opens
    for (const opening of openings(p, now)) {
      const closes = opening + p.durationMs;
      if (opening <= now.getTime() && now.getTime() < closes) {
        if (open === undefined || closes > open.closesAt.getTime()) {
          open = { closesAt: new Date(closes), window: w };
        }
      } else if (opening > now.getTime() && (next === undefined || opening < next.at.getTime())) {
        next = { at: new Date(opening), window: w };
      }
    }
  }
  if (open !== undefined) return { kind: "open", ...open };
  return next === undefined ? { kind: "closed" } : { kind: "closed", next };
}

/** "Sat 02:00 Europe/Berlin": the wall-clock time a person set, in the zone they named. */
export function wallClock(at: Date, timeZone: string): string {
  const p = zoned(at, timeZone);
  const day = WEEKDAYS[weekdayIndex(p.year, p.month, p.day)];
  return `${day} ${pad(p.hour)}:${pad(p.minute)} ${timeZone}`;
}

// ---------------------------------------------------------------------------------------

function parse(w: MaintenanceWindow): Parsed | string {
  const tz = w.timeZone ?? "UTC";
  if (!formatterFor(tz)) {
    return `time zone "${tz}" is not known to this cluster-operator's time zone database; use an IANA name such as "Europe/Berlin" or "UTC" (this window never opens until then)`;
  }
  if (!WINDOW_START_PATTERN.test(w.start)) return `start "${w.start}" is not HH:MM`;
  const minutes = durationMinutes(w.duration);
  if (minutes === undefined) return `duration "${w.duration}" is not like "4h", "90m" or "1h30m"`;
  if (minutes < 1 || minutes > WINDOW_MAX_MINUTES) {
    return `duration "${w.duration}" must be from 1m to 168h`;
  }
  const days = new Set(w.days.map((d) => WEEKDAYS.indexOf(d as Weekday)).filter((i) => i >= 0));
  const [hh, mm] = w.start.split(":").map(Number) as [number, number];
  return { window: w, tz, days, startMinutes: hh * 60 + mm, durationMs: minutes * 60_000 };
}

export function durationMinutes(text: string): number | undefined {
  const m = WINDOW_DURATION_PATTERN.exec(text);
  if (m === null || text === "") return undefined;
  return Number((m[1] ?? "0h").slice(0, -1)) * 60 + Number((m[2] ?? "0m").slice(0, -1));
}

/**
 * The instants (ms) the window opens on the days around `now`: from a week before (a week-
 * long window opened then may still be open) to eight days after (the next opening).
 */
function openings(p: Parsed, now: Date): number[] {
  const today = zoned(now, p.tz);
  const out: number[] = [];
  for (let d = -7; d <= 8; d++) {
    // Date.UTC normalises day overflow, so this walks calendar days in the zone.
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + d));
    const y = date.getUTCFullYear();
    const mo = date.getUTCMonth() + 1;
    const day = date.getUTCDate();
    if (!p.days.has(weekdayIndex(y, mo, day))) continue;
    out.push(instantOf(y, mo, day, p.startMinutes, p.tz));
  }
  return out;
}

/** The instant a wall-clock time in a zone names (see the DST choices at the top). */
function instantOf(y: number, mo: number, d: number, minutes: number, tz: string): number {
  const wall = Date.UTC(y, mo - 1, d, Math.floor(minutes / 60), minutes % 60);
  const offsetBefore = offsetMs(wall - 86_400_000, tz);
  const offsetAfter = offsetMs(wall + 86_400_000, tz);
  const candidates = [wall - offsetBefore, wall - offsetAfter]
    .filter((t) => wallOf(t, tz) === wall)
    .sort((a, b) => a - b);
  // No candidate: the time falls in a gap; the offset before the gap moves it past the jump.
  return candidates[0] ?? wall - offsetBefore;
}

/** The zone's offset from UTC at an instant (ms; east positive). */
function offsetMs(t: number, tz: string): number {
  return wallOf(t, tz) - t;
}

/** The wall-clock time at an instant in the zone, as if it were UTC (ms, whole minutes). */
function wallOf(t: number, tz: string): number {
  const p = zoned(new Date(t), tz);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute);
}

interface Zoned {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

function zoned(at: Date, tz: string): Zoned {
  const f = formatterFor(tz);
  if (f === undefined) throw new RangeError(`unknown time zone ${tz}`);
  const parts: Record<string, number> = {};
  for (const x of f.formatToParts(at)) {
    if (x.type !== "literal") parts[x.type] = Number(x.value);
  }
  return {
    year: parts.year ?? 1970,
    month: parts.month ?? 1,
    day: parts.day ?? 1,
    hour: (parts.hour ?? 0) % 24,
    minute: parts.minute ?? 0,
  };
}

const formatters = new Map<string, Intl.DateTimeFormat | undefined>();

function formatterFor(tz: string): Intl.DateTimeFormat | undefined {
  if (formatters.has(tz)) return formatters.get(tz);
  let f: Intl.DateTimeFormat | undefined;
  try {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
    });
  } catch {
    f = undefined; // RangeError: not an IANA name this runtime knows
  }
  formatters.set(tz, f);
  return f;
}

/** 0 = Mon .. 6 = Sun, the index into WEEKDAYS. */
function weekdayIndex(y: number, mo: number, d: number): number {
  return (new Date(Date.UTC(y, mo - 1, d)).getUTCDay() + 6) % 7;
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/**
 * SpecValid: what the API server cannot check about the windows (whether this operator's
 * time zone database knows a zone). Undefined when no window is configured.
 */
export function specValidCondition(
  cluster: Cluster,
  now: Date,
): Extract<ClusterCondition, { type: "SpecValid" }> | undefined {
  const windows = cluster.spec.disruption?.windows;
  if (windows === undefined || windows.length === 0) return undefined;
  const problems = windowProblems(windows);
  const old = cluster.status?.conditions?.find((c) => c.type === "SpecValid");
  const status = problems.length === 0 ? "True" : "False";
  const reason = problems.length === 0 ? "SpecAccepted" : "UnknownTimeZone";
  const message =
    problems.length === 0
      ? `${windows.length} maintenance window(s) understood`
      : problems.map((p) => `spec.disruption.windows[${p.index}]: ${p.message}`).join("; ");
  const gen = cluster.metadata.generation;
  return {
    type: "SpecValid",
    status,
    reason,
    message,
    lastTransitionTime:
      old !== undefined && old.status === status && old.reason === reason
        ? old.lastTransitionTime
        : rfc3339(now),
    ...(gen === undefined ? {} : { observedGeneration: gen }),
  };
}
