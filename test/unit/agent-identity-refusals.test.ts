// When a valid client certificate the API server keeps refusing is replaced by joining again
// with the bootstrap credential (src/agent/identity/refusals.ts): enough 401s in a row, over
// enough time, none accepted between, and rejoins bounded in rate.
import { describe, expect, it } from "vitest";
import {
  NO_REFUSALS,
  noteAnswer,
  REJOIN_AFTER_MS,
  REJOIN_MAX_INTERVAL_MS,
  REJOIN_MIN_INTERVAL_MS,
  rejoinDue,
  rejoined,
  type RefusalState,
} from "../../src/agent/identity/refusals.js";

/** The state after `answers` ([status, at ms]) from no refusals. */
const after = (answers: [number, number][], from: RefusalState = NO_REFUSALS): RefusalState =>
  answers.reduce((s, [status, at]) => noteAnswer(s, status, at), from);

describe("refusals: when to join again", () => {
  const T = 1_000_000;
  it.each([
    ["no answer yet", [], T, false],
    ["one 401", [[401, T]], T + REJOIN_AFTER_MS, false],
    [
      "three 401s within a second",
      [
        [401, T],
        [401, T + 500],
        [401, T + 900],
      ],
      T + 900,
      false,
    ],
    [
      "three 401s over the window",
      [
        [401, T],
        [401, T + 5_000],
        [401, T + REJOIN_AFTER_MS],
      ],
      T + REJOIN_AFTER_MS,
      true,
    ],
    [
      "an accepted answer between starts the count again",
      [
        [401, T],
        [401, T + 5_000],
        [200, T + 6_000],
        [401, T + REJOIN_AFTER_MS],
      ],
      T + REJOIN_AFTER_MS,
      false,
    ],
    [
      "a 403 is an authenticated answer: the certificate is accepted",
      [
        [401, T],
        [401, T + 5_000],
        [403, T + 6_000],
        [401, T + REJOIN_AFTER_MS],
      ],
      T + REJOIN_AFTER_MS,
      false,
    ],
    [
      "5xx and no answer say nothing of the certificate",
      [
        [401, T],
        [503, T + 1_000],
        [0, T + 2_000],
        [401, T + 5_000],
        [401, T + REJOIN_AFTER_MS],
      ],
      T + REJOIN_AFTER_MS,
      true,
    ],
  ] as [string, [number, number][], number, boolean][])("%s", (_n, answers, now, due) => {
    expect(rejoinDue(after(answers), now)).toBe(due);
  });

  it("rejoins are at least a minute apart, doubling up to 15 minutes while refused", () => {
    const T = 1_000_000;
    const streak = (at: number) => [
      [401, at] as [number, number],
      [401, at + 5_000] as [number, number],
      [401, at + REJOIN_AFTER_MS] as [number, number],
    ];
    let s = after(streak(T));
    let now = T + REJOIN_AFTER_MS;
    expect(rejoinDue(s, now)).toBe(true);
    const gaps: number[] = [];
    for (let i = 0; i < 6; i++) {
      s = rejoined(s, now);
      gaps.push(s.nextMs - now);
      // Refused again at once: not due before the interval.
      s = after(streak(now + 1), s);
      expect(rejoinDue(s, now + REJOIN_AFTER_MS + 1)).toBe(gaps[i]! <= REJOIN_AFTER_MS + 1);
      now = s.nextMs;
      expect(rejoinDue(s, now)).toBe(true);
    }
    expect(gaps).toEqual([1, 2, 4, 8, 15, 15].map((m) => m * REJOIN_MIN_INTERVAL_MS));
    expect(Math.max(...gaps)).toBe(REJOIN_MAX_INTERVAL_MS);
  });

  it("an accepted answer after a rejoin brings the interval back to a minute", () => {
    const s = rejoined(rejoined(NO_REFUSALS, 0), 60_000);
    expect(s.intervalMs).toBe(4 * REJOIN_MIN_INTERVAL_MS);
    expect(noteAnswer(s, 200, 70_000).intervalMs).toBe(REJOIN_MIN_INTERVAL_MS);
  });
});
