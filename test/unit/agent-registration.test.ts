// What the agent registers its Machine with (src/agent/registration.ts), as a table, and that
// the status keeps where it came from (status.ts).
import { describe, expect, it } from "vitest";
import {
  mayRegister,
  NODE_WAIT_MS,
  registration,
  type RegistrationFacts,
} from "../../src/agent/registration.js";

const CP = { "node-role.kubernetes.io/control-plane": "" };

describe("registration protects by default", () => {
  const rows: [string, RegistrationFacts, string][] = [
    ["a control-plane Node: Leader", { nodeLabels: CP }, "Leader NodeLabel Manual Default"],
    [
      "kubeadm's old master label: Leader",
      { nodeLabels: { "node-role.kubernetes.io/master": "" } },
      "Leader NodeLabel Manual Default",
    ],
    [
      "a worker Node: Worker",
      { nodeLabels: { "kubernetes.io/hostname": "n1" } },
      "Worker NodeLabel Manual Default",
    ],
    [
      "no Node to read: Worker by default",
      { nodeLabels: undefined },
      "Worker Default Manual Default",
    ],
    [
      "agent.yaml's role wins over the label",
      { role: "Worker", nodeLabels: CP },
      "Worker AgentConfig Manual Default",
    ],
    [
      "agent.yaml's Leader without a label",
      { role: "Leader", nodeLabels: {} },
      "Leader AgentConfig Manual Default",
    ],
    [
      "agent.yaml's rebootPolicy",
      { rebootPolicy: "Auto", nodeLabels: CP },
      "Leader NodeLabel Auto AgentConfig",
    ],
  ];
  it.each(rows)("%s", (_what, facts, want) => {
    const r = registration(facts);
    expect([r.role, r.roleFrom, r.rebootPolicy, r.rebootPolicyFrom].join(" ")).toBe(want);
  });
});

describe("when the agent registers", () => {
  it.each([
    ["the Node is there", true, 0, true],
    ["no Node yet, just started", false, 1_000, false],
    ["no Node a minute on: registers as Worker (Default)", false, NODE_WAIT_MS, true],
  ])("%s", (_what, seen, waited, want) => {
    expect(mayRegister(seen, waited)).toBe(want);
  });
});
