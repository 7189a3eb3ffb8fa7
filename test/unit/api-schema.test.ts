// The CRDs in config/crd/ and src/api/types.ts describe one contract twice; these checks
// keep the two equal and hold the CRDs to the house rules (a description on every field,
// every list bounded, the printer columns the page shows). The server-side behaviour of the
// same rules is proven in test/integration/api-crd.test.ts.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  CATALOG_MAX_ITEMS,
  CLUSTER_PHASES,
  DIGEST_PATTERN,
  DOWNLOAD_STAGES,
  GROUP,
  MACHINE_CONDITION_TYPES,
  MACHINE_STEPS,
  REBOOT_POLICIES,
  ROLES,
  SLOT_NAMES,
  SLOT_STATES,
  TRIAL_RESULTS,
  UPDATE_STAGES,
  VERSION,
  VERSION_MAX_LENGTH,
  VERSION_PATTERN,
  WEEKDAYS,
  REVERT_TRIGGERS,
  WINDOW_START_PATTERN,
  WINDOWS_MAX_ITEMS,
  PROGRESSING_REASONS,
  SPEC_VALID_REASONS,
} from "../../src/api/types.js";

interface Schema {
  type?: string;
  description?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  enum?: string[];
  maxItems?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  default?: unknown;
  "x-kubernetes-int-or-string"?: boolean;
}

interface Crd {
  spec: {
    group: string;
    scope: string;
    names: { plural: string; kind: string };
    versions: {
      name: string;
      subresources?: { status?: object };
      additionalPrinterColumns: { name: string; jsonPath: string; priority?: number }[];
      schema: { openAPIV3Schema: Schema };
    }[];
  };
}

function load(file: string): Crd {
  return parse(readFileSync(new URL(`../../config/crd/${file}`, import.meta.url), "utf8")) as Crd;
}

const clusterCrd = load("liken.sh_clusters.yaml");
const machineCrd = load("liken.sh_machines.yaml");

function root(crd: Crd): Schema {
  return crd.spec.versions[0]!.schema.openAPIV3Schema;
}

function at(schema: Schema, path: string): Schema {
  let s = schema;
  for (const part of path.split(".")) {
    const next = part === "[]" ? s.items : s.properties?.[part];
    if (next === undefined) throw new Error(`no schema at ${path} (stopped at ${part})`);
    s = next;
  }
  return s;
}

/** Every field below the root, with its path, except metadata (the server's own). */
function* fields(schema: Schema, path = ""): Generator<[string, Schema]> {
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    if (path === "" && name === "metadata") continue;
    const p = path === "" ? name : `${path}.${name}`;
    yield [p, child];
    yield* fields(child, p);
    if (child.items !== undefined) {
      yield [`${p}[]`, child.items];
      yield* fields(child.items, `${p}[]`);
    }
  }
}

function headers(crd: Crd, wide: boolean): string[] {
  const cols = crd.spec.versions[0]!.additionalPrinterColumns.filter(
    (c) => wide || (c.priority ?? 0) === 0,
  );
  return ["NAME", ...cols.map((c) => c.name.toUpperCase())];
}

describe("CRDs match the page and the TypeScript types", () => {
  it.each([
    ["clusters", clusterCrd, "Cluster"],
    ["machines", machineCrd, "Machine"],
  ])("%s: group, version, cluster scope, status subresource", (plural, crd, kind) => {
    expect(crd.spec.group).toBe(GROUP);
    expect(crd.spec.scope).toBe("Cluster");
    expect(crd.spec.names).toMatchObject({ plural, kind });
    expect(crd.spec.versions.map((v) => v.name)).toEqual([VERSION]);
    expect(crd.spec.versions[0]!.subresources?.status).toEqual({});
  });

  it("kubectl get clusters columns are the page's, and -o wide adds TURNS, LKG, TRUST, FRESHNESS and EVIDENCE", () => {
    expect(headers(clusterCrd, false).join(" ")).toBe(
      "NAME STATUS MACHINES VERSION NEWEST AVAILABLE LEADERS ENDPOINT AGE",
    );
    // LKG (status.lastKnownGood, docs/revert.md) after the page's last column; EVIDENCE
    // (status.evidenceText, docs/rings.md) last.
    expect(headers(clusterCrd, true).join(" ")).toBe(
      "NAME STATUS MACHINES VERSION NEWEST AVAILABLE LEADERS ENDPOINT AGE TURNS LKG TRUST FRESHNESS EVIDENCE",
    );
  });

  it("kubectl get machines shows LIKEN and STATUS", () => {
    const h = headers(machineCrd, false);
    expect(h).toContain("LIKEN");
    expect(h).toContain("STATUS");
  });

  it.each([
    ["cluster status.phase", clusterCrd, "status.phase", CLUSTER_PHASES],
    ["machine spec.role", machineCrd, "spec.role", ROLES],
    ["machine spec.rebootPolicy", machineCrd, "spec.rebootPolicy", REBOOT_POLICIES],
    ["machine status.step", machineCrd, "status.step", MACHINE_STEPS],
    ["machine status.updateStage", machineCrd, "status.updateStage", UPDATE_STAGES],
    ["machine status.progress.stage", machineCrd, "status.progress.stage", DOWNLOAD_STAGES],
    ["machine status.bootedSlot", machineCrd, "status.bootedSlot", SLOT_NAMES],
    ["machine status.slots[].state", machineCrd, "status.slots.[].state", SLOT_STATES],
    ["machine status.lastTrial.result", machineCrd, "status.lastTrial.result", TRIAL_RESULTS],
    ["cluster windows[].days[]", clusterCrd, "spec.disruption.windows.[].days.[]", WEEKDAYS],
    ["cluster status.revert.trigger", clusterCrd, "status.revert.trigger", REVERT_TRIGGERS],
  ])("%s enum equals the TypeScript union", (_what, crd, path, values) => {
    expect([...(at(root(crd), path).enum ?? [])].sort()).toEqual([...values].sort());
  });

  it("rebootPolicy defaults to Manual, role to Worker, maxUnavailable to 1", () => {
    expect(at(root(machineCrd), "spec.rebootPolicy").default).toBe("Manual");
    expect(at(root(machineCrd), "spec.role").default).toBe("Worker");
    expect(at(root(clusterCrd), "spec.disruption.maxUnavailable").default).toBe(1);
  });

  it("version and digest patterns and bounds equal the TypeScript ones", () => {
    const version = at(root(clusterCrd), "spec.version");
    expect(version.pattern).toBe(VERSION_PATTERN.source);
    expect(version.maxLength).toBe(VERSION_MAX_LENGTH);
    const entry = at(root(clusterCrd), "spec.releases.catalog.[]");
    expect(entry.properties?.version?.pattern).toBe(VERSION_PATTERN.source);
    expect(entry.properties?.digest?.pattern).toBe(DIGEST_PATTERN.source);
    expect(at(root(clusterCrd), "spec.releases.catalog").maxItems).toBe(CATALOG_MAX_ITEMS);
  });

  it("the brakes' defaults, patterns and bounds equal the TypeScript ones", () => {
    expect(at(root(clusterCrd), "spec.rollout.maxFailedTrials").default).toBe(1);
    expect(at(root(clusterCrd), "spec.rollout.soakSeconds").default).toBe(0);
    const w = at(root(clusterCrd), "spec.disruption.windows.[]");
    expect(w.properties?.start?.pattern).toBe(WINDOW_START_PATTERN.source);
    expect(w.properties?.timeZone?.default).toBe("UTC");
    expect(at(root(clusterCrd), "spec.disruption.windows").maxItems).toBe(WINDOWS_MAX_ITEMS);
  });

  it("cluster condition reasons the CRD documents are the TypeScript ones", () => {
    const described = (at(root(clusterCrd), "status.conditions").description ?? "").replace(
      /\s+/g,
      " ",
    );
    for (const r of [...PROGRESSING_REASONS, ...SPEC_VALID_REASONS]) expect(described).toContain(r);
  });

  it("machine conditions the CRD documents are the TypeScript ones", () => {
    const described = at(root(machineCrd), "status.conditions").description ?? "";
    for (const t of MACHINE_CONDITION_TYPES) expect(described).toContain(t);
  });

  it.each([
    ["clusters", clusterCrd],
    ["machines", machineCrd],
  ])("%s: every field has a description, every list and string a bound", (_p, crd) => {
    const undescribed: string[] = [];
    const unbounded: string[] = [];
    for (const [path, s] of fields(root(crd))) {
      if (!path.endsWith("[]") && !s.description) undescribed.push(path);
      if (s.type === "array" && s.maxItems === undefined) unbounded.push(path);
      const boundedString =
        s.maxLength !== undefined || s.enum !== undefined || s.format === "date-time";
      if (s.type === "string" && !boundedString && !["apiVersion", "kind"].includes(path)) {
        unbounded.push(path);
      }
    }
    expect(undescribed).toEqual([]);
    expect(unbounded).toEqual([]);
  });

  it("the patterns accept the page's examples and refuse near misses", () => {
    expect(VERSION_PATTERN.test("2026.10.10-001")).toBe(true);
    expect(VERSION_PATTERN.test("../etc")).toBe(false);
    expect(VERSION_PATTERN.test("2026/10")).toBe(false);
    expect(DIGEST_PATTERN.test(`sha256:${"ab".repeat(32)}`)).toBe(true);
    expect(DIGEST_PATTERN.test(`sha256:${"AB".repeat(32)}`)).toBe(false);
    expect(DIGEST_PATTERN.test(`sha256:${"ab".repeat(31)}`)).toBe(false);
  });
});
