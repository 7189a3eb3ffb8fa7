// Where a V8 CPU profile's time went (docs/operator-profile.md): `npx tsx bench/cpuprofile-top.ts
// FILE.cpuprofile [N] [FUNCTION]`. Prints the N functions with the most self time and the most
// inclusive time (a function counted once per sample, however deep it recurses), as shares of
// the sampled time; with FUNCTION, the inclusive time of each of its callees instead. The
// profile comes from `--cpu-prof` (bench:operator passes BENCH_OPERATOR_NODE_OPTIONS to the
// operator). Sampled time is wall time: on a loaded machine a sample also lands while the
// process waits for a core, so compare shares, not seconds, across runs.
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, count = "25", under] = process.argv.slice(2);
if (file === undefined) throw new Error("usage: cpuprofile-top.ts FILE.cpuprofile [N] [FUNCTION]");
const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map<number, number>();
p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

const nameOf = (id: number): string => {
  const f = byId.get(id)!.callFrame;
  return `${f.functionName || "(anonymous)"} ${f.url.split("/").slice(-2).join("/")}:${f.lineNumber + 1}`;
};
const subtree = new Map<number, number>();
const subtotal = (id: number): number => {
  const known = subtree.get(id);
  if (known !== undefined) return known;
  let t = self.get(id) ?? 0;
  for (const c of byId.get(id)!.children ?? []) t += subtotal(c);
  subtree.set(id, t);
  return t;
};
const row = (us: number, what: string): string =>
  `${(us / 1e6).toFixed(2).padStart(8)} s ${((100 * us) / total).toFixed(1).padStart(5)} %  ${what}`;
const top = (m: Map<string, number>): string[] =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(count))
    .map(([k, v]) => row(v, k));

console.log(`sampled ${(total / 1e6).toFixed(1)} s`);
if (under !== undefined) {
  const callees = new Map<string, number>();
  for (const n of p.nodes) {
    if (n.callFrame.functionName !== under) continue;
    callees.set("(self)", (callees.get("(self)") ?? 0) + (self.get(n.id) ?? 0));
    for (const c of n.children ?? [])
      callees.set(nameOf(c), (callees.get(nameOf(c)) ?? 0) + subtotal(c));
  }
  console.log(`under ${under}:`, ...top(callees).map((l) => `\n${l}`));
} else {
  const selfBy = new Map<string, number>();
  for (const [id, us] of self) selfBy.set(nameOf(id), (selfBy.get(nameOf(id)) ?? 0) + us);
  const inclusive = new Map<string, number>();
  for (const [id, us] of self) {
    const seen = new Set<string>();
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) {
      const k = nameOf(x);
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + us);
    }
  }
  console.log("self time:", ...top(selfBy).map((l) => `\n${l}`));
  console.log("inclusive time:", ...top(inclusive).map((l) => `\n${l}`));
}
