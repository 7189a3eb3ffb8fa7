// How `liken fleet status` prints its rows: a table for people, JSON or YAML for tools.
// The table keeps one line per row; the machine-readable forms carry every condition whole.
import { stringify } from "yaml";
import { isClusterRow, isUnreachable, type FleetRow } from "./row.js";

export const OUTPUTS = ["table", "json", "yaml"] as const;
export type Output = (typeof OUTPUTS)[number];

const HEAD = ["CONTEXT", "CLUSTER", "RING", "RELEASE", "MACHINES", "STATUS", "BLOCKED BY"];

function cells(r: FleetRow): string[] {
  if (isUnreachable(r)) return [r.context, "-", "-", "-", "-", "NOT REACHED", r.unreachable];
  if (!isClusterRow(r)) return [r.context, "-", "-", "-", "-", "no Cluster", ""];
  const conds = r.conditions
    .filter((c) => c.type !== "Progressing")
    .map((c) => `${c.type}=${c.status}`)
    .join(",");
  return [
    r.context,
    r.cluster,
    r.ring || "-",
    r.release || "-",
    `${r.onRelease}/${r.machines}`,
    r.phase || "-",
    r.blocker || (conds === "" ? "-" : `- (${conds})`),
  ];
}

export function tableText(rows: readonly FleetRow[]): string {
  const table = [HEAD, ...rows.map(cells)];
  const widths = HEAD.map((_, i) =>
    i === HEAD.length - 1 ? 0 : Math.max(...table.map((r) => r[i]!.length)),
  );
  const lines = table.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd(),
  );
  const reached = new Set(rows.filter((r) => !isUnreachable(r)).map((r) => r.context));
  const all = new Set(rows.map((r) => r.context));
  lines.push(`${reached.size} of ${all.size} contexts answered`);
  return `${lines.join("\n")}\n`;
}

/** The document for -o json|yaml: each row as it is, and a count of the contexts reached. */
export function document(rows: readonly FleetRow[]): object {
  const contexts = new Set(rows.map((r) => r.context)).size;
  const unreachable = new Set(rows.filter(isUnreachable).map((r) => r.context)).size;
  return { contexts, reached: contexts - unreachable, rows };
}

export function render(rows: readonly FleetRow[], output: Output): string {
  if (output === "json") return `${JSON.stringify(document(rows), null, 2)}\n`;
  if (output === "yaml") return stringify(document(rows));
  return tableText(rows);
}
