// The agent's side of a turn taken back (seed 71742): what it began it owns up to, and it says it
// did not act on the grant only once nothing it began is left (src/agent/steps.ts disrupted,
// src/agent/status.ts turnTakenBackSeen; the operator's side is operator-taken-back.test.ts).
import { describe, expect, it } from "vitest";
import { machineStatus } from "../../src/agent/status.js";
import { decide, type Observed } from "../../src/agent/steps.js";
import { observed, V2 } from "./agent-fixtures.js";

const GRANTED = "2026-12-02T11:59:00Z";
const now = new Date("2026-12-02T12:00:00Z");

/** V2 staged in slot b; its turn was taken back (the record in status.takenBackTurns). */
function takenBack(over: Partial<Observed> = {}): Observed {
  return observed({
    other: { slot: "b", state: "staged", release: V2 },
    turn: false,
    turnTakenBack: GRANTED,
    ...over,
  });
}

const NOT_BACK = { node: { bootId: "boot-0", ready: { status: "False" } } };

interface Row {
  name: string;
  o: Partial<Observed>;
  action: string;
  step: string;
  /** What status.turnTakenBack says after this decision. */
  ack: string | undefined;
}

const rows: Row[] = [
  {
    name: "nothing begun: it asks again and says it did not act on the grant",
    o: {},
    action: "request-turn",
    step: "UpdatePending",
    ack: GRANTED,
  },
  {
    name: "a drain begun (its status write had failed): uncordons first, no word yet",
    o: { drainBegunDigest: V2.digest },
    action: "release-turn",
    step: "UpdatePending",
    ack: undefined,
  },
  {
    name: "a drain finished: the same, the turn given back before it asks again",
    o: { drainedDigest: V2.digest },
    action: "release-turn",
    step: "UpdatePending",
    ack: undefined,
  },
  {
    name: "a drain begun and its node not back on this boot: Updating, waiting, no word",
    o: { drainBegunDigest: V2.digest, ...NOT_BACK },
    action: "wait",
    step: "Updating",
    ack: undefined,
  },
  {
    name: "a turn held again (granted anew): no word of the old one, it goes on",
    o: { turn: true },
    action: "drain",
    step: "Updating",
    ack: undefined,
  },
];

describe("a turn taken back from this machine", () => {
  it.each(rows)("$name", (row) => {
    const o = takenBack(row.o);
    const dec = decide(o);
    expect(dec.action.kind).toBe(row.action);
    expect(dec.step).toBe(row.step);
    const s = machineStatus(undefined, o, dec, { failed: [] }, { now });
    expect(s.turnTakenBack?.grantedAt).toBe(row.ack);
  });

  it("the word given once stays, and names the newest grant taken back", () => {
    const first = machineStatus(
      undefined,
      takenBack(),
      decide(takenBack()),
      { failed: [] },
      { now },
    );
    const o = takenBack({ turnTakenBack: undefined });
    const later = machineStatus(first, o, decide(o), { failed: [] }, { now });
    expect(later.turnTakenBack).toEqual({ grantedAt: GRANTED });
    const again = takenBack({ turnTakenBack: "2026-12-02T12:10:00Z" });
    const newer = machineStatus(later, again, decide(again), { failed: [] }, { now });
    expect(newer.turnTakenBack).toEqual({ grantedAt: "2026-12-02T12:10:00Z" });
  });
});
