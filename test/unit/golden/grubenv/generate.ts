// Regenerates this folder's golden files with Debian's real grub-editenv (package grub-common,
// installed by testbed/setup-debian.sh): `npx tsx test/unit/golden/grubenv/generate.ts [outdir]`.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CASES, type GoldenCase } from "./cases.js";

export const GOLDEN_DIR = fileURLToPath(new URL(".", import.meta.url));

function editenv(file: string, args: string[]): void {
  execFileSync("grub-editenv", [file, ...args], { stdio: ["ignore", "ignore", "pipe"] });
}

export function generateCase(c: GoldenCase, outDir: string): void {
  const file = join(outDir, `${c.name}.env`);
  rmSync(file, { force: true });
  editenv(file, ["create"]);
  c.ops.forEach((op, i) => {
    const args = "set" in op ? ["set", `${op.set[0]}=${op.set[1]}`] : ["unset", op.unset];
    const last = i === c.ops.length - 1;
    try {
      editenv(file, args);
      if (last && c.lastFails === true) throw new Error(`${c.name}: grub-editenv did not fail`);
    } catch (e) {
      if (!(last && c.lastFails === true)) throw e;
    }
  });
}

export function generateAll(outDir: string): void {
  mkdirSync(outDir, { recursive: true });
  for (const c of CASES) generateCase(c, outDir);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  generateAll(process.argv[2] ?? GOLDEN_DIR);
}
