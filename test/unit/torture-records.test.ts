import { describe, expect, it } from "vitest";
import { bootIds, machineActs, parseAgentLog } from "../../src/torture/machine-records.js";
import type { BootRecordEntry } from "../../src/lab/machine.js";

const line = (o: object): string => JSON.stringify({ level: 30, machine: "m", ...o });
const boot = (n: number, at: number, slot: "a" | "b", trial = false): BootRecordEntry => ({
  n,
  slot,
  trial,
  outcome: "up",
  fault: "none",
  at,
});

describe("a machine's records as the checker's acts", () => {
  const boots = [boot(1, 100, "a"), boot(2, 1000, "b", true)];
  const log = parseAgentLog(
    [
      line({ time: 110, msg: "this boot", bootId: "B1" }),
      line({ time: 120, msg: "this boot", bootId: "B1" }), // the agent restarted in the same boot
      line({ time: 200, msg: "download staged and verified", version: "v2", slot: "b" }),
      line({ time: 300, msg: "begin", step: "drain" }),
      line({ time: 400, msg: "end", step: "check slot" }),
      line({ time: 500, msg: "begin", step: "arm trial" }),
      line({ time: 510, msg: "end", step: "arm trial" }),
      line({ time: 600, msg: "rebooting", reason: "trial armed" }),
      '{"time": 650, "msg": "cut by a SIGK', // a line a SIGKILL cut: nothing said
      line({ time: 1010, msg: "this boot", bootId: "B2" }),
      line({ time: 1100, msg: "end", step: "promote" }),
    ].join("\n"),
  );

  it("takes the arm at its begin: a power cut mid-arm leaves no end in the log (seed 28)", () => {
    const cut = parseAgentLog(
      [
        line({ time: 110, msg: "this boot", bootId: "B1" }),
        line({ time: 200, msg: "download staged and verified", version: "v2", slot: "b" }),
        line({ time: 400, msg: "end", step: "check slot" }),
        line({ time: 450, msg: "begin", step: "arm trial" }),
      ].join("\n"),
    );
    const arms = machineActs("m", boots, cut, (v) => `sha256:${v}`).filter((a) => a.kind === "arm");
    expect(arms).toEqual([
      {
        kind: "arm",
        at: 450,
        machine: "m",
        bootId: "B1",
        slot: "b",
        release: { version: "v2", digest: "sha256:v2" },
      },
    ]);
  });

  it("names each boot by the agent's first line in it, or says it had none", () => {
    expect(bootIds("m", [...boots, boot(3, 2000, "b")], log)).toEqual(["B1", "B2", "m-boot-3-up"]);
  });

  it("turns the log into slot, arm, reboot and promote acts of the right boot", () => {
    const acts = machineActs("m", boots, log, (v) => `sha256:${v}`);
    const rel = { version: "v2", digest: "sha256:v2" };
    expect(acts).toEqual([
      { kind: "boot", at: 100, machine: "m", bootId: "B1", slot: "a", trial: false },
      { kind: "boot", at: 1000, machine: "m", bootId: "B2", slot: "b", trial: true },
      { kind: "slot-write", at: 199, machine: "m", slot: "b", digest: "sha256:v2" },
      { kind: "read-back", at: 200, machine: "m", slot: "b", digest: "sha256:v2", matched: true },
      { kind: "drain-start", at: 300, machine: "m", bootId: "B1", release: rel },
      { kind: "read-back", at: 400, machine: "m", slot: "b", digest: "sha256:v2", matched: true },
      { kind: "arm", at: 500, machine: "m", bootId: "B1", slot: "b", release: rel },
      { kind: "reboot", at: 600, machine: "m", bootId: "B1", cause: "agent" },
      { kind: "promote", at: 1100, machine: "m", bootId: "B2", release: rel },
    ]);
  });
});
