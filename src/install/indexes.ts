// The chunk indexes of the release the installer writes, kept on the state partition for slot a
// (slot-a/index/<artifact>.lkidx, and the top index and pages beside it, where the agent keeps
// the indexes of a release it staged: src/slots/store.ts). Without them the machine's first update would have to read its whole
// running slot to learn what it holds; on a 4 GiB slot under QEMU TCG that pass took longer than
// a download attempt may go without progress (issue 50). The installer has the indexes at hand:
// they are files of the release it installs from, trusted, as the agent trusts them, by the
// digest release.yaml gives each.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { digestOf } from "../verify/digest.js";
import { fetchDocument } from "../verify/fetch.js";
import { keptPages, keptTop } from "../slots/paged-index.js";
import type { Artifact, IndexRef } from "../verify/release.js";
import { InstallError } from "./errors.js";
import type { Log } from "./phases.js";
import type { LoadedRelease } from "./release.js";

/** A file of the release that describes artifact `a`'s chunks, and the name it is kept under. */
interface IndexFile {
  a: Artifact;
  what: string;
  ref: IndexRef;
  kept: string;
}

/**
 * The files kept for each artifact: its chunk index, under its own name (what the download
 * reads to learn what the running slot holds, src/slots/running-index.ts), and its top index
 * and pages (src/slots/paged-index.ts: pages the next release shares are not fetched again).
 */
function indexFiles(a: Artifact): IndexFile[] {
  const out: IndexFile[] = [];
  if (a.index) out.push({ a, what: "chunk index", ref: a.index, kept: a.name });
  if (a.indexTop) out.push({ a, what: "top index", ref: a.indexTop, kept: keptTop(a.name) });
  if (a.indexPages)
    out.push({ a, what: "index pages", ref: a.indexPages, kept: keptPages(a.name) });
  return out;
}

/** One file's bytes, or undefined (said in `log`) when the release's copy cannot be had. */
async function read(r: LoadedRelease, f: IndexFile, log: Log): Promise<Buffer | undefined> {
  // Addressed like an artifact: a path under the release, refused if it leaves it.
  const as: Artifact = { ...f.a, name: `${f.a.name}'s ${f.what}`, path: f.ref.path };
  const file = r.file(as);
  const where = file ?? r.url(as).href;
  let bytes: Buffer;
  try {
    if (file !== undefined && !existsSync(file)) throw new Error("no such file");
    bytes = file !== undefined ? await readFile(file) : await fetchDocument(r.url(as), f.ref.size);
  } catch (e) {
    // The slot boots without it: the first update then indexes the slot once, resumably.
    log(
      `warning: the ${f.what} of ${f.a.name} (${where}) cannot be read (${(e as Error).message}); not kept: the machine's first update reads slot a once to index it, or fetches the pages whole`,
    );
    return undefined;
  }
  if (digestOf(bytes) !== f.ref.digest)
    throw new InstallError(
      "LIKEN_INSTALL_VERIFY_FAILED",
      `the ${f.what} of ${f.a.name} (${where}) has digest ${digestOf(bytes)}, release ${r.release.version} says ${f.ref.digest}; nothing was written. The release is damaged: copy or build it again`,
      { context: { artifact: f.a.name, file: f.ref.path } },
    );
  return bytes;
}

/** The indexes to keep for slot a (kept name -> bytes), each checked against release.yaml. */
export async function releaseIndexes(r: LoadedRelease, log: Log): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (const a of r.release.artifacts)
    for (const f of indexFiles(a)) {
      const bytes = await read(r, f, log);
      if (bytes !== undefined) out.set(f.kept, bytes);
    }
  return out;
}

/**
 * Whether the indexes may be kept on a state partition of `stateBytes`: they take at most a
 * quarter of it, so that the agent still has room to keep the next release's indexes (the
 * same again) and a node's own state (containerd, kubelet) the rest. A 4 GiB rootfs in 4 KiB
 * chunks has a 46 MB index; the image's default state partition is 256 MiB.
 */
export function indexesFit(indexes: ReadonlyMap<string, Buffer>, stateBytes: number): boolean {
  let n = 0;
  for (const b of indexes.values()) n += b.length;
  return n <= stateBytes / 4;
}
