// What a release costs: on the channel's disk, and on the wire to a machine. `liken release
// build` prints it, so the person publishing sees a 4 GiB slot that takes 200 MiB on disk and a
// full download that would move 4 GiB, before a fleet does.
import { readdir } from "node:fs/promises";
import path from "node:path";
import type { Release } from "../verify/release.js";
import { diskBytes } from "./sparse.js";

export interface ReleaseSizes {
  /** The artifacts' bytes as the slot holds them (zeros included). */
  artifacts: number;
  /** What the release directory takes on the channel's disk (allocated blocks: holes are free). */
  disk: number;
  /** A download of every artifact whole (a machine that holds none of its chunks). */
  full: number;
  /**
   * Every chunk as a zstd frame of the packs, with the paged indexes: the most an adaptive
   * download fetches (an update fetches only the frames it lacks). Undefined: some artifact has
   * no pack (--no-pack, --no-index), and its chunks travel plain.
   */
  packed: number | undefined;
}

export async function releaseSizes(
  dir: string,
  r: Release,
  yamlBytes: number,
): Promise<ReleaseSizes> {
  let disk = 0;
  for (const e of await readdir(dir, { withFileTypes: true }))
    if (e.isFile()) disk += await diskBytes(path.join(dir, e.name));
  const artifacts = r.artifacts.reduce((n, a) => n + a.size, 0);
  const packs = r.artifacts.map((a) =>
    a.pack === undefined || a.indexTop === undefined || a.indexPages === undefined
      ? undefined
      : a.pack.size + a.indexTop.size + a.indexPages.size,
  );
  const packed = packs.some((p) => p === undefined)
    ? undefined
    : packs.reduce((n: number, p) => n + p!, yamlBytes);
  return { artifacts, disk, full: artifacts + yamlBytes, packed };
}

/** 4.0 GiB, 212.3 MiB, 18.0 KiB, 512 B: the unit a person reads a size in. */
export function sizeText(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  let v = n;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** One line for the build's output (a YAML comment: it may be pasted with the catalog entry). */
export function sizesLine(version: string, s: ReleaseSizes): string {
  const wire =
    s.packed === undefined
      ? `${sizeText(s.full)} on the wire (no packs: every artifact is fetched whole or by plain chunks)`
      : `on the wire ${sizeText(s.full)} whole or at most ${sizeText(s.packed)} as packed chunks (an update fetches only the chunks a machine lacks)`;
  return `# ${version}: ${sizeText(s.artifacts)} of artifacts, ${sizeText(s.disk)} on disk, ${wire}\n`;
}
