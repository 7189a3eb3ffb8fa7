// What `liken status` shows a person: one line per machine with its step, a progress bar
// while it downloads, the turns held, and what blocks (a PDB, a pending approval, a stall).
// A pure function of the API objects, so the same text is printed live and in a pipe.
import { approvable, heldAgainstApproval } from "./approval.js";
import type { Cluster, ClusterCondition, Machine, MachineStep } from "../../api/types.js";
import { targetView } from "../../release-decision/view.js";

export interface StatusViewOptions {
  now: Date;
  /** Width of the download bar in characters. */
  barWidth?: number;
}

const BAR_WIDTH = 20;

export function progressBar(done: number, total: number, width = BAR_WIDTH): string {
  const clamped = total > 0 ? Math.min(total, Math.max(0, done)) : 0;
  // Integer arithmetic: 58/100 must print 58%, not 57% through 0.58 * 100.
  const percent = total > 0 ? Math.floor((clamped * 100) / total) : 0;
  const full = total > 0 ? Math.floor((clamped * width) / total) : 0;
  return `[${"#".repeat(full)}${".".repeat(width - full)}] ${String(percent).padStart(3)}%`;
}

export function ago(then: string | undefined, now: Date): string {
  if (!then) return "";
  const s = Math.max(0, Math.round((now.getTime() - Date.parse(then)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  return `${Math.round(s / 3600)}h`;
}

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

type Detail = (m: Machine, cluster: Cluster, opts: StatusViewOptions) => string;

function downloading(m: Machine, _c: Cluster, opts: StatusViewOptions): string {
  const s = m.status ?? {};
  const p = s.progress;
  if (!p) return `downloading ${s.target?.version ?? ""}`.trim();
  // The running slot read once before anything is written (its release kept no chunk index).
  if (p.stage === "Indexing")
    return `${progressBar(p.stagePercent ?? 0, 100, opts.barWidth)} indexing slot ${s.bootedSlot ?? "running"} before downloading ${s.target?.version ?? ""}`.trimEnd();
  const what = p.artifact ? ` ${p.artifact}` : "";
  // Adaptive downloads: what came over the network and what the machine already had.
  const adaptive =
    p.bytesFetched !== undefined || p.bytesReused !== undefined
      ? ` (fetched ${bytes(p.bytesFetched ?? 0)}, reused ${bytes(p.bytesReused ?? 0)})`
      : "";
  return `${progressBar(p.bytesDone, p.bytesTotal, opts.barWidth)} ${bytes(p.bytesDone)}/${bytes(p.bytesTotal)}${what}${adaptive}`;
}

function updating(m: Machine, cluster: Cluster, opts: StatusViewOptions): string {
  const s = m.status ?? {};
  const stage = s.updateStage ? s.updateStage.toLowerCase() : "updating";
  const turn = cluster.status?.rebootTurns?.find((t) => t.machine === m.metadata.name);
  const held = turn ? ` (turn ${ago(turn.grantedAt, opts.now)})` : "";
  const b = s.drainBlocker;
  if (!b) return `${stage}${held}`;
  const pdb = b.podDisruptionBudget ? ` (PodDisruptionBudget ${b.podDisruptionBudget})` : "";
  return `${stage}${held}: blocked by pod ${b.pod}${pdb} for ${ago(b.since, opts.now)}`;
}

function failed(m: Machine): string {
  const t = m.status?.lastTrial;
  if (!t) return "failed";
  return `${t.version} failed on slot ${t.slot}: ${t.reason}${t.message ? `: ${t.message}` : ""}`;
}

/** One function per step, so a new step without a line here does not compile. */
const DETAILS: Record<MachineStep, Detail> = {
  Ready: () => "",
  Downloading: downloading,
  UpdatePending: (m, c) => {
    const staged = m.status?.staged;
    const t = m.status?.drainTimedOut;
    const skipped =
      t !== undefined && t.digest === staged?.digest
        ? `; its drain timed out at ${t.at}${t.pod ? ` (pod ${t.pod}${t.podDisruptionBudget ? `, PodDisruptionBudget ${t.podDisruptionBudget}` : ""})` : ""}: back of the queue`
        : "";
    const held = heldAgainstApproval(c);
    const blocking = m.status?.blockingPods ?? [];
    const wait =
      blocking.length > 0
        ? `no turn asked while ${blocking.join(", ")} run${blocking.length === 1 ? "s" : ""} on its node (spec.disruption.blockingPods)`
        : held === undefined
          ? "waiting for a reboot turn"
          : `no turn while the rollout is held (${held})`;
    return `${staged?.version ?? "release"} staged; ${wait}${skipped}`;
  },
  RebootPending: (m, c) => {
    const staged = `${m.status?.staged?.version ?? "release"} staged`;
    const a = approvable(c, m);
    // The command to run only when running it can help; otherwise why not (issue 42).
    return a.ok
      ? `${staged}; waiting for: liken approve-reboot ${c.metadata.name} ${m.metadata.name}`
      : `${staged}; approving cannot help now: ${a.why}`;
  },
  Updating: updating,
  Failed: failed,
  Lost: (m, _c, opts) =>
    `no heartbeat for ${ago(m.status?.lastHeartbeatTime, opts.now) || "over 40s"}; counts against the budget`,
};

/** What the machine is doing or waiting for, in words a person can act on. */
export function machineDetail(m: Machine, cluster: Cluster, opts: StatusViewOptions): string {
  const step = m.status?.step;
  return step ? DETAILS[step](m, cluster, opts) : "";
}

function pad(cells: string[][]): string[] {
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
}

/** The conditions worth a person's attention: a rollout not progressing, a channel unread. */
function conditionLines(conditions: ClusterCondition[]): string[] {
  const lines: string[] = [];
  for (const c of conditions) {
    if (c.type === "Progressing" && (c.status === "False" || c.reason !== "RolloutComplete")) {
      lines.push(`Progressing ${c.status} ${c.reason}: ${c.message}`);
    }
    if (c.type === "ChannelReachable" && c.status !== "True") {
      lines.push(`Channel ${c.reason}: ${c.message}`);
    }
    if (c.type === "ChannelTrusted") lines.push(`Trust ${c.status} ${c.reason}: ${c.message}`);
    if (c.type === "SpecValid" && c.status !== "True") {
      lines.push(`Spec ${c.reason}: ${c.message}`);
    }
    if (c.type === "Reverted" && c.reason !== "RevertSuperseded") {
      lines.push(`Reverted ${c.status} ${c.reason}: ${c.message}`);
    }
  }
  return lines;
}

/**
 * Why a Cluster of a channel trust mode is or is not moving: its target, the wave it waits
 * for, when the metadata expires, a recall (ChannelTrusted says why it is refused).
 */
export function trustLine(cluster: Cluster): string | undefined {
  const t = cluster.status?.trust;
  const mode = cluster.spec.releases.trust?.mode ?? "pinned";
  if (mode === "pinned" || t === undefined) return undefined;
  const waiting =
    t.newest !== undefined && t.newest.version !== t.target?.version && t.waveOpensAt
      ? `waiting for its wave for ${t.newest.version} until ${t.waveOpensAt}`
      : undefined;
  const parts = [
    `trust ${mode}`,
    `target ${t.target?.version ?? "(none)"}`,
    waiting,
    t.recalled && `recalled ${t.recalled.version}: ${t.recalled.reason}`,
    t.expiresAt && `metadata expires ${t.expiresAt} (${t.expiresRole ?? "?"})`,
    t.freshness,
  ];
  return parts.filter((p): p is string => typeof p === "string" && p !== "").join(", ");
}

/** The fleet's target as a person reads it: while a revert is in force, the release it goes back to. */
function targetText(cluster: Cluster): string {
  const view = targetView(cluster);
  switch (view.kind) {
    case "revert":
      return `${view.target.version} (reverting ${view.from.version})`;
    case "revoked":
      return `${view.from.version} (revoked)`;
    case "held":
      return `${view.from.version} (held: ${view.hold.rule})`;
    case "spec":
    case "none":
      return cluster.spec.version ?? cluster.status?.trust?.target?.version ?? "(none)";
    default: {
      const never: never = view;
      return never;
    }
  }
}

/**
 * Machines whose identity is about to lapse (IdentityCurrent False, ExpiresSoon): the agent
 * will lose the API server at that time (docs/machine.md, "Identity").
 */
function identityLines(machines: Machine[]): string[] {
  const lines: string[] = [];
  for (const m of machines) {
    const c = m.status?.conditions?.find((x) => x.type === "IdentityCurrent");
    if (c?.status === "False") {
      const at = m.status?.certificateExpiry ?? "(unknown)";
      lines.push(
        `Identity ${m.metadata.name}: certificate expires ${at} (${c.reason}): ${c.message}`,
      );
    }
  }
  return lines;
}

function headline(cluster: Cluster, count: number): string {
  const st = cluster.status ?? {};
  const turns = (st.rebootTurns ?? []).map((t) => `${t.machine}${t.stalledAt ? " (stalled)" : ""}`);
  return [
    // display: the phase, or why a held rollout does not move (ReleaseFailed, ...).
    `cluster ${cluster.metadata.name}: ${st.display ?? st.phase ?? "Pending"}`,
    ...(cluster.spec.rollout?.paused === true ? ["paused"] : []),
    `machines ${st.machines ?? `?/${count}`}`,
    `target ${targetText(cluster)}`,
    ...(st.lastKnownGood ? [`last known good ${st.lastKnownGood.version}`] : []),
    `available ${st.availableText ?? st.available ?? "(unknown)"}`,
    `turns ${turns.length ? turns.join(", ") : "none"}`,
    ...(st.revokedReleases?.length
      ? [`revoked ${st.revokedReleases.map((r) => r.version).join(", ")}`]
      : []),
  ].join(", ");
}

export function renderStatus(
  cluster: Cluster,
  machines: Machine[],
  opts: StatusViewOptions,
): string[] {
  const mine = machines
    .filter((m) => m.spec.cluster === cluster.metadata.name)
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const rows = [["MACHINE", "ROLE", "POLICY", "LIKEN", "STATUS", "DETAIL"]];
  for (const m of mine) {
    rows.push([
      m.metadata.name,
      m.spec.role ?? "Worker",
      m.spec.rebootPolicy ?? "Manual",
      m.status?.version ?? "-",
      m.status?.step ?? "-",
      machineDetail(m, cluster, opts),
    ]);
  }
  const trust = trustLine(cluster);
  return [
    headline(cluster, mine.length),
    ...(trust === undefined ? [] : [trust]),
    ...pad(rows).map((l) => `  ${l}`),
    ...conditionLines(cluster.status?.conditions ?? []),
    ...identityLines(mine),
  ];
}
