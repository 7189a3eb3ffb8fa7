// What evidence a release needs before `liken promote` signs it into the next channel: from
// flags, or a small YAML file (`--policy FILE`), declared once with zod. A policy that could
// never be met by the contexts given is refused before any cluster is read.
import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { keyPath, strict, z } from "../schema/index.js";
import { PromoteError } from "./errors.js";

const whole = (what: string) =>
  z
    .number({ error: `must be a whole number (${what})` })
    .int({ error: `must be a whole number (${what})` });

export const policySchema = strict(
  {
    /** Clusters of the ring that proved the release. */
    clusters: whole("clusters of the ring").min(1, {
      error: "must be at least 1: promoting on no cluster's evidence is not promoting on evidence",
    }),
    /** Machines, over those clusters, that proved it. */
    machines: whole("machines proven").min(0, { error: "must be 0 or more" }).default(0),
    /** Failed trials allowed over the ring. */
    failedTrials: whole("failed trials allowed").min(0, { error: "must be 0 or more" }).default(0),
    /** How long each counted cluster ran it without a revert, in seconds. */
    soakSeconds: whole("seconds").min(0, { error: "must be 0 or more" }).default(0),
  },
  { unknown: "a policy field" },
);
export type Policy = z.infer<typeof policySchema>;

/** "24h", "90m", "3600s", "3600", "1d" -> seconds. */
export function durationSeconds(text: string): number | undefined {
  const m = /^(\d+)(s|m|h|d)?$/.exec(text.trim());
  if (m === null) return undefined;
  const unit = { s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? "s") as "s" | "m" | "h" | "d"];
  return Number(m[1]) * unit;
}

/** Validates a policy (from a file's mapping, flags over it); throws LIKEN_PROMOTE_POLICY_INVALID. */
export function parsePolicy(raw: unknown, from: string): Policy {
  const r = policySchema.safeParse(raw);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${keyPath(i.path) || "(the policy)"} ${i.message}`);
  throw new PromoteError(
    "LIKEN_PROMOTE_POLICY_INVALID",
    `${from}: ${issues.join("; ")}; a policy is {clusters, machines, failedTrials, soakSeconds} (docs/rings.md)`,
    { context: { from, issues } },
  );
}

/** The policy file's mapping (soak may be written "24h"), or {} without a file. */
export async function readPolicyFile(file: string | undefined): Promise<Record<string, unknown>> {
  if (file === undefined) return {};
  const doc = parseYaml(await readFile(file, "utf8")) as unknown;
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new PromoteError(
      "LIKEN_PROMOTE_POLICY_INVALID",
      `${file}: must be a mapping {clusters, machines, failedTrials, soakSeconds} (docs/rings.md)`,
    );
  }
  const m = { ...(doc as Record<string, unknown>) };
  if (typeof m.soak === "string" || typeof m.soak === "number") {
    const s = durationSeconds(String(m.soak));
    m.soakSeconds = s ?? m.soak;
    delete m.soak;
  }
  return m;
}

/**
 * Why the policy can never be met by a ring read through `contexts` contexts (each context holds
 * one cluster of the ring at most once), or undefined.
 */
export function unmeetable(p: Policy, contexts: number): string | undefined {
  if (p.clusters > contexts) {
    return `clusters ${p.clusters}: only ${contexts} context(s) are read, so at most ${contexts} cluster(s) can show evidence; name more --context, or lower clusters`;
  }
  return undefined;
}
