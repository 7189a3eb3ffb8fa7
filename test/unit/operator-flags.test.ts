// The timing flags of `liken operator`: each refused outside its bounds, with the reason, so a
// threshold that makes live agents read Lost (or a timer Node would fire at once) never runs.
import { InvalidArgumentError } from "commander";
import { describe, expect, it } from "vitest";
import { boundedSeconds, parseSeconds } from "../../src/cli/commands/operator.js";

describe("operator timing flags", () => {
  it.each([
    ["--start-grace", "0s", 0],
    ["--start-grace", "40s", 40],
    ["--lost-after", "4s", 4],
    ["--lost-after", "40s", 40],
    ["--lost-after", "1h", 3600],
    ["--turn-deadline", "30m", 1800],
    ["--turn-deadline", "4s", 4],
    ["--channel-interval", "5m", 300],
  ] as const)("accepts %s %s", (flag, text, want) => {
    expect(boundedSeconds(flag)(text)).toBe(want);
  });

  it.each([
    [
      "--lost-after",
      "3s",
      /--lost-after 3s is 3 s; give 4 s to 3600 s: a machine is Lost after 40 s/,
    ],
    ["--lost-after", "500ms", /give 4 s to 3600 s/],
    ["--lost-after", "2h", /give 4 s to 3600 s/],
    ["--start-grace", "2h", /--start-grace 2h is 7200 s; give 0 s to 3600 s/],
    [
      "--turn-deadline",
      "600h",
      /--turn-deadline 600h is 2160000 s; give 1 s to 2147483 s: at most Node's timer limit/,
    ],
    ["--turn-deadline", "0s", /give 1 s to 2147483 s/],
    ["--channel-interval", "100ms", /give 1 s to 2147483 s/],
  ] as const)("refuses %s %s", (flag, text, re) => {
    expect(() => boundedSeconds(flag)(text)).toThrow(InvalidArgumentError);
    expect(() => boundedSeconds(flag)(text)).toThrow(re);
  });

  it("still reads every unit", () => {
    expect(parseSeconds("500ms")).toBe(0.5);
    expect(parseSeconds("10m")).toBe(600);
  });
});
