// Maintenance windows, table by table: open or closed at an instant, the next opening,
// across days, time zones and DST changes (Europe/Berlin: clocks 02:00 -> 03:00 on
// 2026-03-29 and 03:00 -> 02:00 on 2026-10-25; America/New_York on 2026-03-08 / 2026-11-01).
import { describe, expect, it } from "vitest";
import type { MaintenanceWindow } from "../../src/api/index.js";
import {
  durationMinutes,
  wallClock,
  windowProblems,
  windowState,
} from "../../src/operator/turns/windows.js";

const w = (over: Partial<MaintenanceWindow> = {}): MaintenanceWindow => ({
  days: ["Sat", "Sun"],
  start: "02:00",
  duration: "4h",
  ...over,
});

/** What windowState says, as "open until <iso>", "closed, next <iso>", "always" or "closed". */
function state(windows: MaintenanceWindow[] | undefined, now: string): string {
  const s = windowState(windows, new Date(now));
  if (s.kind === "always") return "always";
  if (s.kind === "open") return `open until ${s.closesAt.toISOString()}`;
  return s.next === undefined ? "closed" : `closed, next ${s.next.at.toISOString()}`;
}

describe("windowState", () => {
  const cases: [string, MaintenanceWindow[] | undefined, string, string][] = [
    ["no windows: always open", undefined, "2026-12-02T10:00:00Z", "always"],
    ["an empty list: always open", [], "2026-12-02T10:00:00Z", "always"],
    // 2026-12-02 is a Wednesday.
    [
      "a weekday outside a weekend window: the next Saturday",
      [w()],
      "2026-12-02T10:00:00Z",
      "closed, next 2026-12-05T02:00:00.000Z",
    ],
    [
      "inside: open until start + duration",
      [w()],
      "2026-12-05T03:59:59Z",
      "open until 2026-12-05T06:00:00.000Z",
    ],
    [
      "the opening instant is inside",
      [w()],
      "2026-12-05T02:00:00Z",
      "open until 2026-12-05T06:00:00.000Z",
    ],
    [
      "the closing instant is outside: the next day's opening",
      [w()],
      "2026-12-05T06:00:00Z",
      "closed, next 2026-12-06T02:00:00.000Z",
    ],
    [
      "a window across midnight is open after midnight on the next day",
      [w({ days: ["Fri"], start: "22:00", duration: "6h" })],
      "2026-12-05T01:00:00Z",
      "open until 2026-12-05T04:00:00.000Z",
    ],
    [
      "Sunday's window, seen on Sunday after it closed: next Saturday",
      [w()],
      "2026-12-06T07:00:00Z",
      "closed, next 2026-12-12T02:00:00.000Z",
    ],
    [
      "a time zone: 02:00 Europe/Berlin in winter is 01:00 UTC",
      [w({ timeZone: "Europe/Berlin" })],
      "2026-12-02T10:00:00Z",
      "closed, next 2026-12-05T01:00:00.000Z",
    ],
    [
      "the day is the zone's day: Sat 01:00 in Tokyo is Fri 16:00 UTC",
      [w({ days: ["Sat"], start: "01:00", duration: "1h", timeZone: "Asia/Tokyo" })],
      "2026-12-04T16:30:00Z",
      "open until 2026-12-04T17:00:00.000Z",
    ],
    [
      "summer time: 02:00 Europe/Berlin in July is 00:00 UTC",
      [w({ timeZone: "Europe/Berlin" })],
      "2026-07-01T10:00:00Z",
      "closed, next 2026-07-04T00:00:00.000Z",
    ],
    [
      "spring forward: 02:30 does not exist on 2026-03-29 in Berlin; it opens an hour later, 03:30 CEST (01:30 UTC)",
      [w({ days: ["Sun"], start: "02:30", duration: "1h", timeZone: "Europe/Berlin" })],
      "2026-03-28T12:00:00Z",
      "closed, next 2026-03-29T01:30:00.000Z",
    ],
    [
      "the week before the change it is 02:30 CET = 01:30 UTC",
      [w({ days: ["Sun"], start: "02:30", duration: "1h", timeZone: "Europe/Berlin" })],
      "2026-03-21T12:00:00Z",
      "closed, next 2026-03-22T01:30:00.000Z",
    ],
    [
      "the week after it is 02:30 CEST = 00:30 UTC",
      [w({ days: ["Sun"], start: "02:30", duration: "1h", timeZone: "Europe/Berlin" })],
      "2026-03-30T12:00:00Z",
      "closed, next 2026-04-05T00:30:00.000Z",
    ],
    [
      "fall back: 02:30 happens twice on 2026-10-25 in Berlin; the first one (CEST, 00:30 UTC)",
      [w({ days: ["Sun"], start: "02:30", duration: "1h", timeZone: "Europe/Berlin" })],
      "2026-10-24T12:00:00Z",
      "closed, next 2026-10-25T00:30:00.000Z",
    ],
    [
      "after the fall-back window closed: next Sunday 00:00 CET (23:00 UTC on Saturday)",
      [w({ days: ["Sun"], start: "00:00", duration: "4h", timeZone: "Europe/Berlin" })],
      "2026-10-25T03:30:00Z",
      "closed, next 2026-10-31T23:00:00.000Z",
    ],
    [
      "New York, spring forward: 01:00 EST (06:00 UTC) for 3h closes at 09:00 UTC (05:00 EDT)",
      [w({ days: ["Sun"], start: "01:00", duration: "3h", timeZone: "America/New_York" })],
      "2026-03-08T08:30:00Z",
      "open until 2026-03-08T09:00:00.000Z",
    ],
    [
      "of two windows, the open one; the later close wins",
      [w(), w({ days: ["Sat"], start: "03:00", duration: "5h" })],
      "2026-12-05T03:30:00Z",
      "open until 2026-12-05T08:00:00.000Z",
    ],
    [
      "of two windows, the nearer opening",
      [w(), w({ days: ["Thu"], start: "23:00", duration: "1h" })],
      "2026-12-02T10:00:00Z",
      "closed, next 2026-12-03T23:00:00.000Z",
    ],
    [
      "a week-long window opened six days ago is still open",
      [w({ days: ["Thu"], start: "12:00", duration: "168h" })],
      "2026-12-02T10:00:00Z",
      "open until 2026-12-03T12:00:00.000Z",
    ],
    [
      "an unknown time zone never opens",
      [w({ timeZone: "Mars/Olympus_Mons" })],
      "2026-12-05T03:00:00Z",
      "closed",
    ],
    [
      "an unknown zone beside a good window: the good one decides",
      [w({ timeZone: "Mars/Olympus_Mons" }), w({ days: ["Wed"] })],
      "2026-12-02T03:00:00Z",
      "open until 2026-12-02T06:00:00.000Z",
    ],
  ];
  it.each(cases)("%s", (_name, windows, now, want) => {
    expect(state(windows, now)).toBe(want);
  });

  it("fall back: a 4h window from 00:00 Berlin on 2026-10-25 lasts four real hours", () => {
    // 00:00 CEST = 22:00 UTC the day before; four hours later is 02:00 UTC (03:00 CET).
    expect(
      state(
        [w({ days: ["Sun"], start: "00:00", timeZone: "Europe/Berlin" })],
        "2026-10-25T01:30:00Z",
      ),
    ).toBe("open until 2026-10-25T02:00:00.000Z");
  });
});

describe("the next opening as a person reads it", () => {
  it.each([
    ["2026-12-05T01:00:00Z", "Europe/Berlin", "Sat 02:00 Europe/Berlin"],
    ["2026-07-04T00:00:00Z", "Europe/Berlin", "Sat 02:00 Europe/Berlin"],
    ["2026-12-05T02:00:00Z", "UTC", "Sat 02:00 UTC"],
    ["2026-12-04T16:00:00Z", "Asia/Tokyo", "Sat 01:00 Asia/Tokyo"],
  ])("%s in %s is %s", (at, tz, want) => {
    expect(wallClock(new Date(at), tz)).toBe(want);
  });
});

describe("window problems the API server cannot see", () => {
  it.each([
    [[w()], []],
    [[w({ timeZone: "Europe/Berlin" })], []],
    [[w({ timeZone: "Mars/Olympus_Mons" })], ['time zone "Mars/Olympus_Mons" is not known']],
    [[w({ duration: "200h" })], ['duration "200h" must be from 1m to 168h']],
    [[w({ duration: "0m" })], ['duration "0m" must be from 1m to 168h']],
    [[w({ start: "24:00" })], ['start "24:00" is not HH:MM']],
  ] as [MaintenanceWindow[], string[]][])("%j", (windows, want) => {
    const got = windowProblems(windows).map((p) => p.message);
    expect(got.length).toBe(want.length);
    want.forEach((text, i) => expect(got[i]).toContain(text));
  });

  it.each([
    ["4h", 240],
    ["90m", 90],
    ["1h30m", 90],
    ["", undefined],
    ["4", undefined],
    ["1d", undefined],
    ["30m4h", undefined],
  ])("duration %j is %j minutes", (text, want) => {
    expect(durationMinutes(text)).toBe(want);
  });
});
