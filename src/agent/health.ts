// Health gates before promotion, pure: what must be true on a trial boot before the agent makes
// the new slot the default (as greenboot's required.d: the boot is good only when every check
// says so). Two kinds of gate:
//   - the Cluster's spec.health.pods: pods on this machine's node, selected by namespace and
//     label selector; at least one matches and every match is Ready SINCE THIS BOOT (its Ready
//     condition's lastTransitionTime after the boot started: a Ready the API server still
//     shows from the previous boot says nothing about this one, rejoin.ts);
//   - agent.yaml's health.commands: commands run on the host; exit 0 within timeoutSeconds.
// The trial is promoted only when every gate passed within the prove deadline (timeouts.proveMs,
// counted from the trial boot, as for the rejoin); otherwise the agent reboots without
// promoting, the bootloader boots the old default, and the report names the gate and what it
// said (HealthCheckFailed). The running of the gates is health-run.ts; this file decides.
import type { HealthPods, LabelSelector } from "../api/types.js";
import { HEARTBEAT_SLACK_MS } from "./rejoin.js";

/** A check run on the host (agent.yaml `health.commands`). */
export interface HealthCommand {
  name: string;
  /** argv, run without a shell (write `[sh, -c, "..."]` for one). */
  command: string[];
  timeoutSeconds: number;
}

/** greenboot gives each check no limit; a minute covers a local API probe with retries. */
export const DEFAULT_HEALTH_TIMEOUT_SECONDS = 60;
/** Within the prove deadline a gate is never given longer than this. */
export const MAX_HEALTH_TIMEOUT_SECONDS = 3600;
/** How much of a gate's output the status carries: enough for an error line or three. */
export const HEALTH_OUTPUT_MAX_CHARS = 400;
/**
 * A failing gate is looked at again this long after its last check: often enough that a pod
 * that becomes Ready a few seconds late costs seconds, rarely enough that a slow check does
 * not run back to back for the whole prove deadline.
 */
export const HEALTH_RECHECK_MS = 5_000;

/** The outcome of one gate. */
export type GateResult = { gate: string; ok: true } | { gate: string; ok: false; output: string };

/** The last check of every gate on this trial boot (times on the boot clock, clock.ts). */
export interface HealthCheck {
  /** The gates it checked (gateNames), so a changed spec.health is checked afresh. */
  gates: string[];
  at: number;
  /** The first gate that did not pass, undefined when all passed. */
  failed?: { gate: string; output: string };
}

/** What decide() sees of the gates while the trial proves itself. */
export interface HealthSeen {
  /** Every configured gate's name; empty: nothing to check. */
  gates: string[];
  last?: HealthCheck;
}

export type GateStep =
  /** Every gate passed (or none is configured): promote. */
  | { kind: "passed" }
  /** Run the gates now. */
  | { kind: "check"; why: string }
  /** A gate failed at its last check; looked at again later (or the deadline decides). */
  | { kind: "failing"; gate: string; output: string; why: string };

/** What the gates say now, given their last check. */
export function gateStep(h: HealthSeen | undefined, now: number): GateStep {
  if (h === undefined || h.gates.length === 0) return { kind: "passed" };
  const last = h.last;
  if (last === undefined || last.gates.join("\n") !== h.gates.join("\n")) {
    return { kind: "check", why: `checking the health gates: ${h.gates.join(", ")}` };
  }
  if (last.failed === undefined) return { kind: "passed" };
  const { gate, output } = last.failed;
  const why = `health gate ${gate} does not pass: ${output}`;
  if (now - last.at >= HEALTH_RECHECK_MS) return { kind: "check", why };
  return { kind: "failing", gate, output, why };
}

/**
 * Why the trial is given up when the prove deadline passed with the node Ready: the gate that
 * did not pass and what it said (the report after the fallback carries this).
 */
export function healthGiveUp(slot: string, proveMs: number, step: GateStep): string {
  if (step.kind === "failing") {
    return `trial of slot ${slot}: health gate ${step.gate} did not pass within ${proveMs} ms: ${step.output}`;
  }
  return `trial of slot ${slot}: the health gates were not all checked within ${proveMs} ms`;
}

/** The gates' names in the order they run: the Cluster's pods first, then the host commands. */
export function gateNames(
  pods: readonly HealthPods[],
  commands: readonly HealthCommand[],
): string[] {
  return [...pods.map(podsGateName), ...commands.map((c) => `command ${c.name}`)];
}

export function podsGateName(g: HealthPods): string {
  return `pods ${g.namespace}/${selectorText(g.selector)}`;
}

/** The selector as the API server's labelSelector query parameter takes it. */
export function selectorText(s: LabelSelector): string {
  const labels = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  const exprs = (s.matchExpressions ?? []).map((e) => {
    const values = (e.values ?? []).join(",");
    switch (e.operator) {
      case "In":
        return `${e.key} in (${values})`;
      case "NotIn":
        return `${e.key} notin (${values})`;
      case "Exists":
        return e.key;
      case "DoesNotExist":
        return `!${e.key}`;
      default: {
        const never: never = e.operator;
        throw new Error(`unknown selector operator ${String(never)}`);
      }
    }
  });
  return [...labels, ...exprs].join(",");
}

/** The part of a Pod the pods gate reads. */
export interface PodView {
  metadata: { name: string; namespace?: string; deletionTimestamp?: string };
  status?: {
    phase?: string;
    conditions?: {
      type: string;
      status: string;
      reason?: string;
      message?: string;
      lastTransitionTime?: string;
    }[];
  };
}

/**
 * The pods gate over the pods the API server listed for it (namespace, selector, this node):
 * at least one, every one Ready since `bootStartedAt` (wall ms; same slack as the Node's
 * heartbeat, rejoin.ts: the time has whole seconds). A pod on its way out (deleted, or a
 * finished Job's pod) is not a verdict on this boot and is left out.
 */
export function podsGate(
  g: HealthPods,
  node: string,
  pods: readonly PodView[],
  bootStartedAt: number,
): GateResult {
  const gate = podsGateName(g);
  const live = pods.filter(
    (p) => p.metadata.deletionTimestamp === undefined && p.status?.phase !== "Succeeded",
  );
  if (live.length === 0) {
    return { gate, ok: false, output: `no pod matches on node ${node}` };
  }
  const readySince = (p: PodView): boolean =>
    (p.status?.conditions ?? []).some(
      (c) =>
        c.type === "Ready" &&
        c.status === "True" &&
        c.lastTransitionTime !== undefined &&
        Date.parse(c.lastTransitionTime) >= bootStartedAt - HEARTBEAT_SLACK_MS,
    );
  const notReady = live.filter((p) => !readySince(p));
  if (notReady.length === 0) return { gate, ok: true };
  const one = (p: PodView): string => {
    const c = p.status?.conditions?.find((x) => x.type === "Ready");
    const stale = c?.status === "True";
    const why =
      c === undefined
        ? "no Ready condition"
        : stale
          ? `Ready since ${c.lastTransitionTime ?? "an unknown time"}, before this boot`
          : `Ready ${c.status}${c.reason ? ` ${c.reason}` : ""}`;
    return `${p.metadata.name} (${p.status?.phase ?? "no phase"}, ${why})`;
  };
  const shown = notReady.slice(0, 5).map(one).join(", ");
  const more = notReady.length > 5 ? ` and ${notReady.length - 5} more` : "";
  return {
    gate,
    ok: false,
    output: `${notReady.length} of ${live.length} pod(s) not Ready since this boot: ${shown}${more}`,
  };
}

/**
 * A command's output for a status message: one line, whitespace collapsed, the last
 * HEALTH_OUTPUT_MAX_CHARS characters (where the error usually is), marked when cut.
 */
export function trimOutput(text: string, max = HEALTH_OUTPUT_MAX_CHARS): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= max) return flat;
  return `…${flat.slice(flat.length - (max - 1))}`;
}
