// The agent's V8 flags are the same under systemd and in the lab that measures it
// (src/agent/node-options.ts): the unit's LIKEN_NODE_FLAGS is the lab's list, and node starts
// with them the way the unit's environment reaches it.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { AGENT_NODE_OPTIONS } from "../../src/agent/node-options.js";
import { launcherScript } from "../../testbed/package-agent.js";

const unit = readFileSync(
  new URL("../../config/systemd/liken-agent.service", import.meta.url),
  "utf8",
);

/** The unit's Environment= assignments, as NAME=value (systemd's double quotes removed). */
function environment(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const l of unit.split("\n")) {
    const m = /^Environment="?([A-Z_]+)=(.*?)"?$/.exec(l.trim());
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

describe("the agent's node options", () => {
  it("are the unit's LIKEN_NODE_FLAGS, once", () => {
    // systemd's quoting: the whole assignment in double quotes, as it has spaces.
    const set = unit.split("\n").filter((l) => l.includes("LIKEN_NODE_FLAGS="));
    expect(set).toEqual([`Environment="LIKEN_NODE_FLAGS=${AGENT_NODE_OPTIONS.join(" ")}"`]);
  });

  it("start node as the unit gives them: its environment, and the launcher's command line", () => {
    // Node refuses most V8 flags in NODE_OPTIONS ("not allowed in NODE_OPTIONS") and then does
    // not start at all: a unit that put them there gave machines an agent that never ran.
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      ...environment(),
    };
    const flags = (env.LIKEN_NODE_FLAGS ?? "").split(" ").filter((f) => f !== "");
    const r = spawnSync(process.execPath, [...flags, "-e", "process.stdout.write('up')"], {
      env,
      encoding: "utf8",
    });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("up");
    // The launcher puts LIKEN_NODE_FLAGS on node's command line.
    expect(launcherScript()).toContain('exec "$node" ${LIKEN_NODE_FLAGS:-} "$bundle" "$@"');
  });
});
