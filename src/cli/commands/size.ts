// Sizes on the command line, shared by `liken release` and `liken agent download` (which must
// not load the release tooling: it runs in the agent's download child).
import { InvalidArgumentError } from "commander";

/** "4M", "512MiB", "2G", "65536" -> bytes. */
export function parseSize(v: string): number {
  const m = /^(\d+)\s*([KMGT]?)(i?B)?$/i.exec(v.trim());
  if (!m) throw new InvalidArgumentError(`"${v}" is not a size (for example 4M, 512MiB, 2G)`);
  const unit = { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 }[
    m[2]!.toUpperCase() as "" | "K"
  ]!;
  return Number(m[1]) * unit;
}
