// The Cluster status around the turns: the conditions, the STATUS column, the channel's part,
// AVAILABLE and EVIDENCE, as decide.ts composes them.
import type { ChannelView } from "../channel/view.js";
import { type ClusterCondition, type ClusterStatus, type Machine } from "../../api/index.js";
import { availableText } from "../status/available.js";
import {
  evidenceOf,
  evidenceText,
  newestEvidence,
  uncountedNote,
  type EvidenceInput,
} from "../status/evidence.js";
import type { NodeBoots } from "../view/node-boot.js";

import { type HeldNotice, isNoticed } from "./decision.js";
export function withEvidence(
  made: ClusterStatus,
  i: Pick<EvidenceInput, "machines" | "lost" | "target" | "now"> & { nodes?: NodeBoots },
): void {
  const input: EvidenceInput = {
    ...i,
    // No Node read (a decision made without the Node reads): no machine proves anything.
    nodes: i.nodes ?? new Map(),
    before: made.evidence,
    revoked: made.revokedReleases ?? [],
    recalls: made.trust?.recalls ?? [],
  };
  const evidence = evidenceOf(input);
  if (evidence.length === 0) return;
  made.evidence = evidence;
  const newest = newestEvidence(evidence);
  const text = evidenceText(evidence, newest && uncountedNote(input, newest));
  if (text !== undefined) made.evidenceText = text;
}

export function withChannelConditions(
  list: ClusterCondition[],
  channel: ChannelView | undefined,
): ClusterCondition[] {
  if (channel === undefined) return list;
  const reached = upsert(list, channel.condition);
  return channel.trust === undefined ? reached : upsert(reached, channel.trust.condition);
}

export function withChannelStatus(made: ClusterStatus, channel: ChannelView): void {
  made.channel = channel.channel;
  if (channel.available !== undefined) made.available = channel.available;
  if (channel.trust !== undefined) made.trust = channel.trust.status;
}

export function withAvailableText(made: ClusterStatus, machines: readonly Machine[]): void {
  const shown = availableText(made.available, machines, made.revokedReleases);
  if (shown === undefined) delete made.availableText;
  else made.availableText = shown;
}

export function heldNotice(
  before: readonly ClusterCondition[] | undefined,
  now: ClusterCondition | undefined,
): HeldNotice | undefined {
  if (now?.type !== "Progressing" || !isNoticed(now.reason)) return undefined;
  const old = before?.find((c) => c.type === "Progressing");
  return old?.reason === now.reason ? undefined : { reason: now.reason, message: now.message };
}

export const HELD_REASONS: ReadonlySet<string> = new Set([
  "RolloutStalled",
  "RolloutPaused",
  "ReleaseRevoked",
  "ReleaseFailed",
  "OutsideMaintenanceWindow",
  "CanaryPaused",
]);

export function displayOf(
  phase: string,
  p: ClusterCondition | undefined,
  specValid: ClusterCondition | undefined,
): string {
  // A spec the API admitted but this operator cannot use (a time zone its database does not
  // know: the API cannot check, docs/adr/time-zone-validation.md) comes first: it is what a
  // person must fix, and `kubectl get clusters` is where they look.
  if (specValid?.status === "False") return "SpecInvalid";
  return p !== undefined && HELD_REASONS.has(p.reason) ? p.reason : phase;
}

export function findProgressing(list: readonly ClusterCondition[]): ClusterCondition | undefined {
  return list.find((c) => c.type === "Progressing");
}

export function withSpecValid(
  list: ClusterCondition[],
  c: ClusterCondition | undefined,
): ClusterCondition[] {
  if (c !== undefined) return upsert(list, c);
  return list.filter((x) => x.type !== "SpecValid");
}

export function upsert(list: ClusterCondition[], c: ClusterCondition): ClusterCondition[] {
  return list.some((x) => x.type === c.type)
    ? list.map((x) => (x.type === c.type ? c : x))
    : [...list, c];
}

export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => sameJson(x ?? null, b[i] ?? null));
  }
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x).filter((k) => x[k] !== undefined);
  const count = Object.keys(y).filter((k) => y[k] !== undefined).length;
  return keys.length === count && keys.every((k) => y[k] !== undefined && sameJson(x[k], y[k]));
}
