// The agent's log can be read on a machine (issue 50): the unit sends it to the journal and the
// console, and `liken machine image --serial-console` makes the serial port the console.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { serialArgs } from "../../src/cli/commands/machine.js";

const unit = readFileSync(
  new URL("../../config/systemd/liken-agent.service", import.meta.url),
  "utf8",
).split("\n");

describe("the agent's log on a machine", () => {
  it("goes to the journal and the console", () => {
    expect(unit).toContain("StandardOutput=journal+console");
    expect(unit).toContain("StandardError=journal+console");
  });

  it("is on the serial port with --serial-console (the last console= is /dev/console)", () => {
    const base = "root=PARTLABEL=liken-%s rw";
    expect(serialArgs(base, true)).toBe(`${base} console=tty0 console=ttyS0,115200`);
    expect(serialArgs(base, false)).toBe(base);
    // A console the user named is theirs.
    expect(serialArgs(`${base} console=ttyS1,9600`, true)).toBe(`${base} console=ttyS1,9600`);
  });
});
