// The paged index of an artifact (../verify/index-pages.ts), fetched in proportion to the
// change: the top index (digest from release.yaml), then each page from the running slot's
// kept pages when its hash is there, else by Range from the release's pages file. Every page
// is checked against the top index before it is used; the assembled index must be the very
// index release.yaml names (same digest), so a page can only describe the artifact truly.
// Any fault throws; the caller fetches the plain index instead (./adaptive.ts).
import { ChunkIndex } from "../verify/chunk-index.js";
import { digestOf } from "../verify/digest.js";
import { VerifyError } from "../verify/errors.js";
import {
  checkRangeReply,
  discardBody,
  fetchDocument,
  fetchFailure,
  get,
  DEFAULT_IDLE_TIMEOUT_MS,
} from "../verify/fetch.js";
import {
  assemble,
  checkPage,
  PAGE_ENTRY,
  TopIndex,
  type FrameTable,
} from "../verify/index-pages.js";
import { artifactUrl, type Artifact, type IndexRef } from "../verify/release.js";
import type { SlotName } from "./config.js";
import type { SeedStats } from "./seeded.js";
import type { SlotStore } from "./store.js";

/** A sample of one page in SAMPLE_PAGES decides whether the rest is worth fetching. */
export const SAMPLE_PAGES = 32;

/** The chunks of some fetched pages: `worth` says whether the running slot holds enough of them. */
export type Worth = (chunks: { hash: Buffer; length: number }[]) => Promise<boolean>;

export interface Paged {
  index: ChunkIndex;
  frames: FrameTable;
  /** Pages taken from the running slot's kept pages, and fetched. */
  reusedPages: number;
  fetchedPages: number;
}

/** The kept names beside the slot's classic index (an artifact name has no '.'). */
export const keptTop = (name: string): string => `${name}.top`;
export const keptPages = (name: string): string => `${name}.pages`;

async function keptOf(
  store: SlotStore,
  slot: SlotName,
  name: string,
  ref: IndexRef,
): Promise<Buffer | undefined> {
  const b = await store.keptIndex(slot, name);
  return b !== undefined && digestOf(b) === ref.digest ? b : undefined;
}

/** The running slot's kept pages by hash (hex): any artifact's, whatever its release. */
async function runningPages(
  store: SlotStore,
  slot: SlotName,
  name: string,
): Promise<Map<string, Buffer>> {
  const found = new Map<string, Buffer>();
  const top = await store.keptIndex(slot, keptTop(name));
  const pages = await store.keptIndex(slot, keptPages(name));
  if (top === undefined || pages === undefined || top.length < 16) return found;
  try {
    const t = TopIndex.parse(top, Number(top.readBigUInt64BE(8)), pages.length, "kept top index");
    for (let p = 0; p < t.pages; p++) {
      const r = t.page(p);
      found.set(r.hash.toString("hex"), pages.subarray(r.at, r.at + r.length));
    }
  } catch {
    // A foreign or torn file: no page is reused, each is fetched.
  }
  return found;
}

/** Fetches pages [first, last] with one Range request; checks each against the top index. */
async function fetchPages(
  url: URL,
  top: TopIndex,
  pagesSize: number,
  first: number,
  last: number,
  stats: SeedStats,
): Promise<Buffer[]> {
  const from = top.page(first).at;
  const to = top.page(last).at + top.page(last).length - 1;
  const res = await get(url, { range: `bytes=${from}-${to}` });
  stats.requests++;
  const fault = checkRangeReply(res.status, res.headers, from, to, pagesSize);
  if (fault !== undefined) {
    // The whole file answered to a Range: the body is dropped at once (not read to its end,
    // the pages file of a 4 GiB slot is 41 MB), and the caller stops asking this server for
    // ranges (./index-fetch.ts): every later range would cost the whole file again.
    discardBody(res.body);
    throw new VerifyError(
      fault.kind === "ignored" ? "LIKEN_VERIFY_RANGE_IGNORED" : "LIKEN_VERIFY_HTTP_STATUS",
      `GET ${url.href}: ${fault.reason}`,
      { context: { url: url.href, status: res.status } },
    );
  }
  const parts: Buffer[] = [];
  let n = 0;
  try {
    for await (const piece of res.body) {
      n += (piece as Buffer).length;
      if (n > to - from + 1) {
        throw new VerifyError(
          "LIKEN_VERIFY_BEYOND_SIZE",
          `GET ${url.href}: more than the ${to - from + 1} bytes of bytes=${from}-${to}`,
        );
      }
      parts.push(piece as Buffer);
    }
  } catch (cause) {
    discardBody(res.body);
    if (cause instanceof VerifyError) throw cause;
    throw fetchFailure(url, cause, DEFAULT_IDLE_TIMEOUT_MS);
  } finally {
    stats.fetched += n;
  }
  const body = Buffer.concat(parts);
  if (body.length !== to - from + 1) {
    throw new VerifyError(
      "LIKEN_VERIFY_CONNECTION",
      `GET ${url.href}: the body of bytes=${from}-${to} ended after ${body.length} bytes`,
    );
  }
  const out: Buffer[] = [];
  for (let p = first; p <= last; p++) {
    const r = top.page(p);
    const b = body.subarray(r.at - from, r.at - from + r.length);
    checkPage(top, p, b, `${url.href}`);
    out.push(b);
  }
  return out;
}

/** The top index: kept from an earlier attempt at this release, else fetched; by digest. */
async function topOf(
  o: { store: SlotStore; target: SlotName; base: URL },
  a: Artifact,
  stats: SeedStats,
): Promise<Buffer> {
  const topRef = a.indexTop!;
  const what = `artifact ${a.name}: top index ${topRef.path}`;
  const kept = await keptOf(o.store, o.target, keptTop(a.name), topRef);
  if (kept !== undefined) return kept;
  const topBytes = await fetchDocument(
    artifactUrl(o.base, { name: a.name, path: topRef.path }),
    topRef.size,
  );
  stats.fetched += topBytes.length;
  stats.requests++;
  if (digestOf(topBytes) !== topRef.digest) {
    throw new VerifyError(
      "LIKEN_VERIFY_DIGEST_MISMATCH",
      `${what} has digest ${digestOf(topBytes)}, release.yaml says ${topRef.digest}; refused`,
    );
  }
  return topBytes;
}

/**
 * Few pages kept (a new image, a large change): a sample of the missing pages first (one in
 * SAMPLE_PAGES, kept in `pages`), and when the running slot holds almost none of their chunks,
 * no more pages: the caller downloads in full and the index costs a 32nd of its size.
 */
async function sampled(
  url: URL,
  top: TopIndex,
  pagesSize: number,
  pages: (Buffer | undefined)[],
  stats: SeedStats,
  worth: Worth,
): Promise<boolean> {
  const sample: { hash: Buffer; length: number }[] = [];
  const picked: number[] = [];
  for (let p = 0; p < top.pages; p += SAMPLE_PAGES) picked.push(p);
  const missing = picked.filter((p) => pages[p] === undefined);
  const one = async (p: number): Promise<void> => {
    [pages[p]] = await fetchPages(url, top, pagesSize, p, p, stats);
  };
  // The first alone: a server that ignores Range (Python's http.server) answers each of these
  // with the whole pages file, and 128 of them at once for a 4 GiB slot were 128 copies of
  // 41 MB, most cut off by a reset. One answer is enough to know; the rest never leave.
  if (missing.length > 0) await one(missing[0]!);
  // Then at once: a sample is a few dozen small requests, their round trips need not add up.
  await Promise.all(missing.slice(1).map(one));
  for (const p of picked) {
    for (let k = 0; k < top.chunksIn(p); k++) {
      const e = pages[p]!.subarray(k * PAGE_ENTRY, (k + 1) * PAGE_ENTRY);
      sample.push({ hash: e.subarray(8, 40), length: e.readUInt32BE(0) });
    }
  }
  return worth(sample);
}

/** The artifact's index and frame table from its pages; throws on any fault (see above). */
export async function fetchPaged(
  o: {
    store: SlotStore;
    running: SlotName;
    target: SlotName;
    base: URL;
    log?: (m: string) => void;
  },
  a: Artifact,
  stats: SeedStats,
  worth?: Worth,
): Promise<Paged | "not-worth"> {
  const topRef = a.indexTop!;
  const pagesRef = a.indexPages!;
  const topBytes = await topOf(o, a, stats);
  const top = TopIndex.parse(
    topBytes,
    a.size,
    pagesRef.size,
    `artifact ${a.name}: top index ${topRef.path}`,
  );
  // An earlier attempt at this release kept all its pages: nothing to fetch.
  const whole = await keptOf(o.store, o.target, keptPages(a.name), pagesRef);
  const have = whole ? new Map<string, Buffer>() : await runningPages(o.store, o.running, a.name);
  const pages: (Buffer | undefined)[] = new Array(top.pages);
  for (let p = 0; p < top.pages; p++) {
    const r = top.page(p);
    const b = whole ? whole.subarray(r.at, r.at + r.length) : have.get(r.hash.toString("hex"));
    if (b === undefined) continue;
    checkPage(top, p, b, `kept page of ${a.name}`);
    pages[p] = b;
  }
  const reusedPages = pages.filter((b) => b !== undefined).length;
  const url = artifactUrl(o.base, { name: a.name, path: pagesRef.path });
  if (worth !== undefined && reusedPages * 2 < top.pages) {
    if (!(await sampled(url, top, pagesRef.size, pages, stats, worth))) return "not-worth";
  }
  for (let p = 0; p < top.pages;) {
    if (pages[p] !== undefined) {
      p++;
      continue;
    }
    let q = p;
    while (q + 1 < top.pages && pages[q + 1] === undefined) q++;
    (await fetchPages(url, top, pagesRef.size, p, q, stats)).forEach((b, k) => (pages[p + k] = b));
    p = q + 1;
  }
  const { index, frames } = assemble(top, (p) => pages[p]!);
  if (digestOf(index) !== a.index!.digest) {
    throw new VerifyError(
      "LIKEN_VERIFY_INDEX_INVALID",
      `artifact ${a.name}: its index pages make an index with digest ${digestOf(index)}, release.yaml names ${a.index!.digest}; the pages do not describe the artifact`,
    );
  }
  const parsed = ChunkIndex.parse(index, a.size, `artifact ${a.name}: index from pages`);
  await o.store.keepIndex(o.target, a.name, index);
  await o.store.keepIndex(o.target, keptTop(a.name), topBytes);
  if (!whole)
    await o.store.keepIndex(o.target, keptPages(a.name), Buffer.concat(pages as Buffer[]));
  return { index: parsed, frames, reusedPages, fetchedPages: top.pages - reusedPages };
}
