// The layering of src/ (docs/adr/layers.md), enforced: every import of every file under src/,
// type-only and dynamic imports included, must point to a lower layer, or sideways along one of
// the few edges listed below. The next arrow back up fails here, naming the file and the import.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "src");

/** Each top-level piece of src/ and its layer: imports go to a lower number only. */
const LAYER: Readonly<Record<string, number>> = {
  // The shared error shape: imports nothing.
  "errors.ts": 0,
  // Bottom: talk to the outside world (the API server, the boot medium, the C++ addon, the
  // control plane binaries for tests and the lab); nothing of liken's but errors.ts.
  api: 1,
  bootloader: 1,
  native: 1,
  controlplane: 1,
  // Prometheus exposition (a registry served over HTTP): each program's own metrics sit above it.
  metrics: 1,
  // How config files are declared (zod helpers, the refusal sentence): each module's own
  // declaration sits above it (docs/adr/config-schema.md).
  schema: 1,
  // Pieces of the product's mechanisms.
  verify: 2,
  slots: 2,
  release: 2,
  drain: 2,
  coordinator: 2,
  // The release the fleet may take now: one pure decision (spec or follow, trust and its expiry,
  // recalls, revocations, the revert) and the view of it that both programs read
  // (docs/adr/one-release-decision.md).
  "release-decision": 2,
  // The two programs' logic.
  agent: 3,
  operator: 3,
  // What people start.
  cli: 4,
  lab: 4,
  // Many clusters at once through kubeconfig contexts (`liken fleet status`, pause --contexts).
  fleet: 4,
  // Promotion across rings of clusters on signed evidence (`liken promote`, docs/rings.md).
  promote: 4,
  // Building what ships: the operator image and the Helm chart from config/.
  "operator-image": 4,
  deploy: 4,
  // Making a machine's disk from a release (`liken machine install|image`, the QEMU testbed's disk).
  install: 4,
  // The fleet's safety rules judged on an observed history (the simulator, the lab's observer).
  invariants: 4,
  // The deterministic simulation: the real deciders driven on a virtual clock, checked by the
  // invariants (docs/simulation.md).
  sim: 5,
  // Real processes under seeded faults, checked by the invariants (docs/torture.md).
  torture: 5,
};

/** Imports within one layer that are allowed (from -> to); no cycle among them. */
const SIDEWAYS: ReadonlySet<string> = new Set([
  "slots -> verify", // a slot is verified as it is written
  "release -> verify", // building a release writes the documents verify reads
  "lab -> cli", // the lab starts liken through the CLI's entry
  "operator-image -> cli", // the operator image carries the CLI's bundle
  "cli -> install", // `liken machine install|image`
  "cli -> fleet", // `liken fleet status`, `liken rollout pause|resume --contexts`
  "cli -> promote", // `liken promote`
  "bootloader -> native", // efivarfs variables are immutable files: the addon's chattr
  "torture -> sim", // one seeded generator (sim/rng.ts) for both kinds of torture
  "controlplane -> api", // the local control plane hands out kubeconfigs in the API client's one format
]);

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return filesUnder(p);
    return /\.(ts|mts)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The top-level piece of src/ a path belongs to ("agent", "errors.ts"), or null if outside. */
function pieceOf(file: string): string | null {
  const rel = path.relative(SRC, file);
  if (rel.startsWith("..")) return null;
  // An import names the compiled file ("../errors.js"); the source is errors.ts.
  return rel.split(path.sep)[0]?.replace(/\.js$/, ".ts") ?? null;
}

/** Every relative import of a file, static, type-only, re-exports and dynamic. */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  return info.importedFiles.map((f) => f.fileName).filter((f) => f.startsWith("."));
}

interface Arrow {
  file: string;
  spec: string;
  from: string;
  to: string;
}

function arrows(): Arrow[] {
  const out: Arrow[] = [];
  for (const file of filesUnder(SRC)) {
    const from = pieceOf(file)!;
    for (const spec of importsOf(file)) {
      const to = pieceOf(path.resolve(path.dirname(file), spec));
      if (to !== null && to !== from) {
        out.push({ file: path.relative(SRC, file), spec, from, to });
      }
    }
  }
  return out;
}

/** Whether `from` may import `to`. */
export function allowed(from: string, to: string): boolean {
  const a = LAYER[from];
  const b = LAYER[to];
  if (a === undefined || b === undefined) return false;
  return b < a || (a === b && SIDEWAYS.has(`${from} -> ${to}`));
}

/** Each file under src/ (relative to it) -> the files under src/ it imports. */
function fileGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of filesUnder(SRC)) {
    const to = importsOf(file)
      .map((spec) => path.resolve(path.dirname(file), spec).replace(/\.js$/, ".ts"))
      .filter((f) => !path.relative(SRC, f).startsWith(".."))
      .map((f) => path.relative(SRC, f));
    graph.set(path.relative(SRC, file), [...new Set(to)]);
  }
  return graph;
}

/**
 * Every import circle of a graph: its strongly connected components of more than one node,
 * or a node that imports itself (Tarjan's algorithm), each sorted, for a readable failure.
 */
export function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    for (let w = stack.pop()!; ; w = stack.pop()!) {
      onStack.delete(w);
      scc.push(w);
      if (w === v) break;
    }
    if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

describe("import circles", () => {
  it("no files under src/ import each other, directly or round a longer circle", () => {
    expect(circles(fileGraph())).toEqual([]);
  });

  it.each([
    ["none", { a: ["b"], b: ["c"], c: [] }, []],
    ["a pair", { a: ["b"], b: ["a"] }, [["a", "b"]]],
    [
      "a longer circle beside a tail",
      { a: ["b"], b: ["c"], c: ["a"], d: ["a"] },
      [["a", "b", "c"]],
    ],
    ["a file importing itself", { a: ["a"] }, [["a"]]],
    [
      "two circles",
      { a: ["b"], b: ["a"], c: ["d"], d: ["c"] },
      [
        ["a", "b"],
        ["c", "d"],
      ],
    ],
  ])("finds %s", (_name, g, want) => {
    const found = circles(new Map(Object.entries(g)));
    expect(found.sort((x, y) => x[0]!.localeCompare(y[0]!))).toEqual(want);
  });
});

describe("layers", () => {
  it("every piece of src/ has a layer", () => {
    const pieces = readdirSync(SRC).filter((n) => !n.startsWith("."));
    expect(pieces.filter((p) => LAYER[p] === undefined)).toEqual([]);
  });

  it("no import points up or sideways outside the listed edges", () => {
    const against = arrows()
      .filter((x) => !allowed(x.from, x.to))
      .map((x) => `${x.file} imports ${x.spec} (${x.from} -> ${x.to})`);
    expect(against).toEqual([]);
  });

  it("finds an arrow back up when there is one", () => {
    expect(allowed("agent", "cli")).toBe(false);
    expect(allowed("api", "agent")).toBe(false);
    expect(allowed("verify", "slots")).toBe(false);
    expect(allowed("operator", "agent")).toBe(false);
    expect(allowed("cli", "agent")).toBe(true);
  });

  it("the sideways edges form no cycle", () => {
    for (const edge of SIDEWAYS) {
      const [from, to] = edge.split(" -> ");
      expect(SIDEWAYS.has(`${to} -> ${from}`)).toBe(false);
      expect(LAYER[from!]).toBe(LAYER[to!]);
    }
  });
});

// The operator's concept folders (docs/design.md, "The operator's house"): each answers one
// question, and imports go down this table only, or sideways along an edge listed below. A
// module that reaches across concepts (a rule of turns/ reading the wiring of run/, a channel
// read reaching into the decision) fails here, naming the file and the import.
const OPERATOR = path.join(SRC, "operator");
const OPERATOR_LAYER: Readonly<Record<string, number>> = {
  // Shared by every part: the error shape, the log, the Events' sink.
  "errors.ts": 0,
  "logger.ts": 0,
  "events.ts": 0,
  // What the operator reads off one Machine or Cluster, and the conditions' helpers.
  view: 1,
  // The rules, each on its own question.
  turns: 2, // which machine may go down now: budget, windows, canary, brake, leaders, take-backs
  channel: 2, // what the signed channel vouches for: poll, trust, follow, floor
  status: 2, // the Cluster's columns: summary, AVAILABLE, EVIDENCE
  peers: 2, // which machines serve chunks to which
  identity: 2, // whose certificate request is approved
  webhook: 2, // what the admission webhook refuses
  // When the fleet goes back, and to what (reads the brakes of turns/).
  revert: 3,
  // One decision composed of the rules above (decide.ts), its input and output (decision.ts).
  decide: 4,
  // The wiring: watches, passes, election, heartbeats, the guarded writes, metrics.
  run: 5,
};
const OPERATOR_SIDEWAYS: ReadonlySet<string> = new Set([
  "status -> channel", // AVAILABLE names the channel's newest release
]);

function operatorPieceOf(file: string): string | null {
  const rel = path.relative(OPERATOR, file);
  if (rel.startsWith("..")) return null;
  return rel.split(path.sep)[0]?.replace(/\.js$/, ".ts") ?? null;
}

export function operatorAllowed(from: string, to: string): boolean {
  const a = OPERATOR_LAYER[from];
  const b = OPERATOR_LAYER[to];
  if (a === undefined || b === undefined) return false;
  return b < a || (a === b && OPERATOR_SIDEWAYS.has(`${from} -> ${to}`));
}

describe("the operator's concept folders", () => {
  it("every file under src/operator/ is in a folder (or a shared file) of the table", () => {
    const unplaced = filesUnder(OPERATOR)
      .map((f) => operatorPieceOf(f)!)
      .filter((p) => OPERATOR_LAYER[p] === undefined);
    expect([...new Set(unplaced)]).toEqual([]);
  });

  it("imports go down the table, or sideways along a listed edge", () => {
    const wrong: string[] = [];
    for (const file of filesUnder(OPERATOR)) {
      const from = operatorPieceOf(file)!;
      for (const spec of importsOf(file)) {
        const to = operatorPieceOf(path.resolve(path.dirname(file), spec));
        if (to === null || to === from || operatorAllowed(from, to)) continue;
        wrong.push(`${path.relative(SRC, file)} imports ${spec} (${from} -> ${to})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it.each([
    ["turns", "view", true],
    ["view", "turns", false],
    ["turns", "run", false],
    ["channel", "decide", false],
    ["run", "decide", true],
    ["status", "channel", true],
    ["channel", "status", false],
  ])("%s -> %s allowed: %s", (from, to, want) => {
    expect(operatorAllowed(from, to)).toBe(want);
  });
});
