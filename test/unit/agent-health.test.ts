// Health gates before promotion: the pure rules (health.ts), the trial decision with gates
// (steps.ts), the report after a fallback (memory.ts), the config (config.ts), and the command
// runner with real child processes (health-run.ts): exit codes, timeouts, capped output.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAgentSection } from "../../src/agent/config.js";
import {
  HEALTH_OUTPUT_MAX_CHARS,
  HEALTH_RECHECK_MS,
  gateNames,
  gateStep,
  podsGate,
  selectorText,
  trimOutput,
  type HealthSeen,
  type PodView,
} from "../../src/agent/health.js";
import { COMMAND_OUTPUT_CAP_BYTES, runHealthCommand } from "../../src/agent/health-run.js";
import { EMPTY_MEMORY, armed, gaveUp } from "../../src/agent/memory.js";
import { fellBack } from "../../src/agent/memory-verdicts.js";
import { DEFAULT_TIMEOUTS, decide, type Observed } from "../../src/agent/steps.js";
import type { AgentSlotsConfig } from "../../src/slots/config.js";
import { V1, V2, observed } from "./agent-fixtures.js";

const NOW = 1_000_000;
const CILIUM = { namespace: "kube-system", selector: { matchLabels: { "k8s-app": "cilium" } } };
const GATES = gateNames([CILIUM], [{ name: "etcd", command: ["true"], timeoutSeconds: 5 }]);

describe("health gates: what their last check says", () => {
  const cases: { name: string; h: HealthSeen | undefined; want: string; gate?: string }[] = [
    { name: "no gates configured: passed", h: undefined, want: "passed" },
    { name: "an empty list of gates: passed", h: { gates: [] }, want: "passed" },
    { name: "gates, never checked: check", h: { gates: GATES }, want: "check" },
    {
      name: "all passed at the last check: passed",
      h: { gates: GATES, last: { gates: GATES, at: NOW - 60_000 } },
      want: "passed",
    },
    {
      name: "one failed just now: failing, naming it",
      h: {
        gates: GATES,
        last: { gates: GATES, at: NOW - 1, failed: { gate: "command etcd", output: "exit 3" } },
      },
      want: "failing",
      gate: "command etcd",
    },
    {
      name: `one failed ${HEALTH_RECHECK_MS} ms ago: check again`,
      h: {
        gates: GATES,
        last: {
          gates: GATES,
          at: NOW - HEALTH_RECHECK_MS,
          failed: { gate: "command etcd", output: "x" },
        },
      },
      want: "check",
    },
    {
      name: "the gates changed since the last check (spec.health edited): check afresh",
      h: { gates: GATES, last: { gates: GATES.slice(1), at: NOW - 1 } },
      want: "check",
    },
  ];
  it.each(cases)("$name", ({ h, want, gate }) => {
    const s = gateStep(h, NOW);
    expect(s.kind).toBe(want);
    if (gate !== undefined) expect(s).toMatchObject({ gate });
  });

  it("names the gates: the Cluster's pods first, then the host commands", () => {
    expect(GATES).toEqual(["pods kube-system/k8s-app=cilium", "command etcd"]);
  });
});

describe("health gates: the pods gate", () => {
  /** This boot started at BOOT; the pods' Ready changed at SINCE (after it) unless told. */
  const BOOT = Date.parse("2026-12-02T10:00:00Z");
  const SINCE = "2026-12-02T10:01:00Z";
  const pod = (
    name: string,
    ready: string | undefined,
    over: Partial<PodView> = {},
    since = SINCE,
  ): PodView => ({
    metadata: { name, namespace: "kube-system" },
    status: {
      phase: "Running",
      conditions:
        ready === undefined
          ? []
          : [
              {
                type: "Ready",
                status: ready,
                lastTransitionTime: since,
                ...(ready === "False" ? { reason: "ContainersNotReady" } : {}),
              },
            ],
    },
    ...over,
  });
  const cases: { name: string; pods: PodView[]; ok: boolean; output?: string }[] = [
    { name: "one pod, Ready", pods: [pod("c1", "True")], ok: true },
    {
      name: "no pod matches: not passed (a DaemonSet pod that was never created is no pass)",
      pods: [],
      ok: false,
      output: "no pod matches on node n1",
    },
    {
      name: "one of two not Ready: named with its reason",
      pods: [pod("c1", "True"), pod("c2", "False")],
      ok: false,
      output:
        "1 of 2 pod(s) not Ready since this boot: c2 (Running, Ready False ContainersNotReady)",
    },
    {
      name: "no Ready condition yet",
      pods: [pod("c1", undefined, { status: { phase: "Pending" } })],
      ok: false,
      output: "1 of 1 pod(s) not Ready since this boot: c1 (Pending, no Ready condition)",
    },
    {
      name: "a pod being deleted and a finished pod are left out",
      pods: [
        pod("c1", "True"),
        pod("old", "False", {
          metadata: { name: "old", deletionTimestamp: "2026-12-02T10:00:00Z" },
        }),
        pod("job", "False", { status: { phase: "Succeeded" } }),
      ],
      ok: true,
    },
    {
      name: "Ready since before this boot: the API server's copy of the last boot's pod",
      pods: [pod("c1", "True", {}, "2026-12-02T09:59:00Z")],
      ok: false,
      output:
        "1 of 1 pod(s) not Ready since this boot: c1 (Running, Ready since 2026-12-02T09:59:00Z, before this boot)",
    },
    {
      name: "Ready within the second the boot started: counts (whole-second times)",
      pods: [pod("c1", "True", {}, "2026-12-02T09:59:59Z")],
      ok: true,
    },
    {
      name: "Ready with no transition time: not known to be this boot's",
      pods: [
        pod("c1", undefined, {
          status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
        }),
      ],
      ok: false,
      output:
        "1 of 1 pod(s) not Ready since this boot: c1 (Running, Ready since an unknown time, before this boot)",
    },
  ];
  it.each(cases)("$name", ({ pods, ok, output }) => {
    const r = podsGate(CILIUM, "n1", pods, BOOT);
    expect(r.ok).toBe(ok);
    expect(r.gate).toBe("pods kube-system/k8s-app=cilium");
    if (output !== undefined) expect(r).toMatchObject({ output });
  });

  it("writes selectors as the API server's labelSelector parameter takes them", () => {
    expect(
      selectorText({
        matchLabels: { app: "csi", tier: "node" },
        matchExpressions: [
          { key: "zone", operator: "In", values: ["a", "b"] },
          { key: "canary", operator: "NotIn", values: ["yes"] },
          { key: "managed", operator: "Exists" },
          { key: "legacy", operator: "DoesNotExist" },
        ],
      }),
    ).toBe("app=csi,tier=node,zone in (a,b),canary notin (yes),managed,!legacy");
  });
});

describe("health gates: output for the status", () => {
  it("one line, whitespace collapsed", () => {
    expect(trimOutput("  etcd:\n  unhealthy\t(3)\n")).toBe("etcd: unhealthy (3)");
  });
  it(`the last ${HEALTH_OUTPUT_MAX_CHARS} characters, marked when cut`, () => {
    const t = trimOutput(`${"x".repeat(1000)} the error`);
    expect(t).toHaveLength(HEALTH_OUTPUT_MAX_CHARS);
    expect(t.startsWith("…")).toBe(true);
    expect(t.endsWith(" the error")).toBe(true);
  });
});

describe("the trial decision with health gates", () => {
  const trial = (over: Partial<Observed>): Observed =>
    observed({
      boot: { kind: "on-trial", slot: "b" },
      running: { slot: "b", state: "staged", release: V2 },
      other: { slot: "a", state: "staged", release: V1 },
      trialSeenAt: NOW - 1_000,
      now: NOW,
      ...over,
    });
  const failing: HealthSeen = {
    gates: GATES,
    last: {
      gates: GATES,
      at: NOW - 1,
      failed: { gate: "command etcd", output: "exited with 3: etcd: unhealthy" },
    },
  };
  const cases: { name: string; o: Observed; action: string; why?: RegExp }[] = [
    { name: "no gates: promoted once it rejoined (as before)", o: trial({}), action: "promote" },
    {
      name: "gates not checked yet: run them",
      o: trial({ health: { gates: GATES } }),
      action: "check-health",
    },
    {
      name: "node not Ready: the gates wait for the rejoin",
      o: trial({
        health: { gates: GATES },
        node: { bootId: "boot-1", ready: { status: "False" } },
      }),
      action: "wait",
    },
    {
      name: "every gate passed: promote",
      o: trial({ health: { gates: GATES, last: { gates: GATES, at: NOW - 1 } } }),
      action: "promote",
      why: /every health gate passed/,
    },
    {
      name: "a gate failed just now, deadline ahead: wait, saying which",
      o: trial({ health: failing }),
      action: "wait",
      why: /health gate command etcd does not pass: exited with 3: etcd: unhealthy/,
    },
    {
      name: "a gate still fails at the prove deadline: reboot without promoting, naming it",
      o: trial({ health: failing, trialSeenAt: NOW - DEFAULT_TIMEOUTS.proveMs }),
      action: "reboot",
      why: /trial of slot b: health gate command etcd did not pass within 900000 ms: exited with 3: etcd: unhealthy/,
    },
    {
      name: "never checked by the deadline: reboot without promoting",
      o: trial({ health: { gates: GATES }, trialSeenAt: NOW - DEFAULT_TIMEOUTS.proveMs }),
      action: "reboot",
      why: /not all checked within/,
    },
  ];
  it.each(cases)("$name", ({ o, action, why }) => {
    const d = decide(o);
    expect(d.action.kind).toBe(action);
    expect(d.phase).toBe("Proving");
    if (why !== undefined) expect(d.why).toMatch(why);
    if (action === "reboot") expect(d.action).toMatchObject({ failure: "HealthCheckFailed" });
  });

  it("a trial that does not rejoin is the rejoin's business, not a health gate's", () => {
    const d = decide(
      trial({ apiReachable: false, health: failing, trialSeenAt: NOW - DEFAULT_TIMEOUTS.proveMs }),
    );
    expect(d.action).toEqual({
      kind: "reboot",
      reason: expect.stringMatching(/did not rejoin/),
      failure: "TrialUnobserved",
    });
  });
});

describe("the report after a health gate failed", () => {
  const AT = "2026-12-02T10:00:00Z";
  it("fell back with reason HealthCheckFailed, naming the gate and its output", () => {
    const why =
      "trial of slot b: health gate command etcd did not pass within 8000 ms: exited with 3: etcd: unhealthy";
    const m = fellBack(
      gaveUp(armed(EMPTY_MEMORY, V2, "b", AT), why, "HealthCheckFailed"),
      "b",
      "a",
      V2,
      AT,
    );
    expect(m.lastTrial).toMatchObject({ ...V2, result: "Failed", reason: "HealthCheckFailed" });
    expect(m.lastTrial?.message).toContain("health gate command etcd did not pass");
    expect(m.lastTrial?.message).toContain("etcd: unhealthy");
    expect(m.failed).toEqual([{ ...V2, at: AT, reason: "HealthCheckFailed" }]);
  });
  it("a trial given up without a gate stays TrialFellBack", () => {
    const m = fellBack(
      gaveUp(armed(EMPTY_MEMORY, V2, "b", AT), "did not rejoin"),
      "b",
      "a",
      V2,
      AT,
    );
    expect(m.lastTrial?.reason).toBe("TrialFellBack");
  });
});

describe("agent.yaml health.commands", () => {
  const slots = { cmdline: "/proc/cmdline" } as AgentSlotsConfig;
  const parse = (extra: string) =>
    parseAgentSection(
      `machine: m1\ncluster: c\nbootloader: {backend: grub, envDir: /g}\n${extra}`,
      "/etc/liken/agent.yaml",
      slots,
    );
  it("absent: no commands", () => {
    expect(parse("").health).toEqual({ commands: [] });
  });
  it("parses name, argv and timeoutSeconds (default 60)", () => {
    const c = parse(
      "health:\n  commands:\n    - {name: etcd, command: [etcdctl, endpoint, health], timeoutSeconds: 20}\n    - {name: disk, command: [sh, -c, 'test -w /var']}\n",
    );
    expect(c.health?.commands).toEqual([
      { name: "etcd", command: ["etcdctl", "endpoint", "health"], timeoutSeconds: 20 },
      { name: "disk", command: ["sh", "-c", "test -w /var"], timeoutSeconds: 60 },
    ]);
  });
  it.each([
    ["health: {checks: []}", "health.checks is not a known field"],
    ["health: {commands: {}}", "health.commands must be a list"],
    ["health: {commands: [{command: [x]}]}", "health.commands[0].name must be a name"],
    [
      "health: {commands: [{name: a, command: []}]}",
      "health.commands[0].command must be a non-empty list",
    ],
    [
      "health: {commands: [{name: a, command: 'sh -c x'}]}",
      "health.commands[0].command must be a non-empty list",
    ],
    ["health: {commands: [{name: a, command: [x]}, {name: a, command: [y]}]}", "a is named twice"],
    [
      "health: {commands: [{name: a, command: [x], timeoutSeconds: 0}]}",
      "timeoutSeconds must be a positive number",
    ],
    [
      "health: {commands: [{name: a, command: [x], timeoutSeconds: 7200}]}",
      "timeoutSeconds must be at most 3600",
    ],
  ])("refuses %s", (yaml, message) => {
    expect(() => parse(yaml)).toThrow(message);
  });
});

describe("the command runner, with real child processes", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "liken-health-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const sh = (script: string, timeoutSeconds = 10) =>
    runHealthCommand({ name: "t", command: ["sh", "-c", script], timeoutSeconds });

  it("exit 0 passes", async () => {
    expect(await sh("echo fine")).toEqual({ gate: "command t", ok: true });
  });
  it("a non-zero exit fails with its code and its output, stdout and stderr both", async () => {
    // Two pipes: what arrives first is up to the scheduler, so only the content is checked.
    const r = await sh("echo etcd: >&2; echo unhealthy; exit 3");
    expect(r).toMatchObject({ gate: "command t", ok: false });
    const out = r.ok ? "" : r.output;
    expect(out).toMatch(/^exited with 3: /);
    expect(out).toContain("etcd:");
    expect(out).toContain("unhealthy");
  });
  it("a signal is named", async () => {
    expect(await sh("kill -TERM $$")).toMatchObject({
      ok: false,
      output: "was killed by SIGTERM: no output",
    });
  });
  it("a command that cannot start says why", async () => {
    const r = await runHealthCommand({
      name: "t",
      command: [path.join(dir, "nope")],
      timeoutSeconds: 5,
    });
    expect(r).toMatchObject({ ok: false });
    expect(r.ok ? "" : r.output).toMatch(/could not run .*nope: .*ENOENT/);
  });
  it("a command past its timeout is killed with what it started, and fails", async () => {
    const pidFile = path.join(dir, "child.pid");
    const t = Date.now();
    const r = await sh(`echo starting; sleep 30 & echo $! > ${pidFile}; wait`, 1);
    expect(Date.now() - t).toBeLessThan(5_000);
    expect(r).toMatchObject({ ok: false, output: "did not finish within 1 s (killed): starting" });
    // The grandchild (sleep) went with the group: gone, or a zombie waiting to be reaped.
    const { readFileSync } = await import("node:fs");
    const pid = Number(readFileSync(pidFile, "utf8"));
    const state = (): string => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]!;
      } catch {
        return "gone";
      }
    };
    expect(["gone", "Z"]).toContain(state());
  });
  it(`keeps the last ${COMMAND_OUTPUT_CAP_BYTES} bytes of a flood, and the status gets its tail`, async () => {
    // 4 MiB of output, then the line that matters.
    const r = await sh("head -c 4194304 /dev/zero | tr '\\0' x; echo; echo the error; exit 1");
    expect(r.ok).toBe(false);
    const out = r.ok ? "" : r.output;
    expect(out.length).toBeLessThanOrEqual(HEALTH_OUTPUT_MAX_CHARS + 20);
    expect(out.endsWith("the error")).toBe(true);
  });
});
