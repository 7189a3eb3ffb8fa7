// The agent's V8 flags are the same under systemd and in the lab that measures it
// (src/agent/node-options.ts): the unit's NODE_OPTIONS is the lab's list.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { AGENT_NODE_OPTIONS } from "../../src/agent/node-options.js";

const unit = readFileSync(
  new URL("../../config/systemd/liken-agent.service", import.meta.url),
  "utf8",
);

describe("the agent's node options", () => {
  it("are the unit's NODE_OPTIONS, once", () => {
    // systemd's quoting: the whole assignment in double quotes, as it has spaces.
    const set = unit.split("\n").filter((l) => l.includes("NODE_OPTIONS="));
    expect(set).toEqual([`Environment="NODE_OPTIONS=${AGENT_NODE_OPTIONS.join(" ")}"`]);
  });
});
