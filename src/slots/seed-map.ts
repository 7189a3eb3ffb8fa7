// What the running slot holds, by chunk hash: "a chunk with this SHA-256 and length is at this
// device offset". Compact (24 bytes a chunk in typed arrays, no object or string per chunk:
// a 1 GiB slot in 4 KiB chunks takes 6 MiB) because it lives in the download child, whose
// budget is 100 MiB. Only a claim: every byte read through it is hashed against the new
// index before it is written, so a stale or corrupt slot costs a fetch, never a bad write.
import { INDEX_ENTRY, INDEX_HEADER, type ChunkIndex } from "../verify/chunk-index.js";

function prefixOf(hash: Uint8Array): number {
  return Buffer.from(hash.buffer, hash.byteOffset, 6).readUIntBE(0, 6);
}

export class SeedMap {
  /** The hash's first 48 bits as a number (exact in a double, compared without BigInt). */
  private prefixes = new Float64Array(1024);
  private offsets = new Float64Array(1024);
  private lengths = new Uint32Array(1024);
  private order: Uint32Array | undefined;
  size = 0;

  /** Adds a chunk: its SHA-256, length, and where it starts on the device. */
  add(hash: Uint8Array, length: number, at: number): void {
    if (this.size === this.prefixes.length) this.grow();
    this.prefixes[this.size] = prefixOf(hash);
    this.offsets[this.size] = at;
    this.lengths[this.size] = length;
    this.size++;
    this.order = undefined;
  }

  /** Adds every chunk of an index whose artifact starts at `base` on the device. */
  addIndex(index: ChunkIndex, base: number): void {
    for (let i = 0; i < index.count; i++)
      this.add(index.hash(i), index.length(i), base + index.offset(i));
  }

  private grow(): void {
    const n = this.prefixes.length * 2;
    const p = new Float64Array(n);
    p.set(this.prefixes);
    const o = new Float64Array(n);
    o.set(this.offsets);
    const l = new Uint32Array(n);
    l.set(this.lengths);
    this.prefixes = p;
    this.offsets = o;
    this.lengths = l;
  }

  private sorted(): Uint32Array {
    if (this.order === undefined) {
      const order = new Uint32Array(this.size);
      for (let i = 0; i < this.size; i++) order[i] = i;
      const p = this.prefixes;
      const o = this.offsets;
      // By prefix, then by device offset: a chunk found many times (a zero block) is looked
      // up at a preferred offset by binary search within its run.
      order.sort((a, b) => p[a]! - p[b]! || o[a]! - o[b]!);
      this.order = order;
    }
    return this.order;
  }

  /** The first position in the sorted order at or after (prefix, offset). */
  private lowerBound(order: Uint32Array, prefix: number, offset: number): number {
    let lo = 0;
    let hi = order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const p = this.prefixes[order[mid]!]!;
      if (p < prefix || (p === prefix && this.offsets[order[mid]!]! < offset)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * A device offset whose chunk has this hash prefix and length, or undefined. The prefix is
   * 48 bits (for 262144 chunks, a 1 GiB slot, about one collision in 10,000 downloads): a
   * collision only makes the reader fetch that chunk after the full hash differs.
   * Among several (a zero block appears thousands of times), one of `prefer` wins: the offset
   * right after the previous chunk's source, or the chunk's own position, so that local
   * chunks stay contiguous and are read in large pieces.
   */
  find(hash: Uint8Array, length: number, prefer: readonly number[] = []): number | undefined {
    const order = this.sorted();
    const want = prefixOf(hash);
    for (const at of prefer) {
      const k = this.lowerBound(order, want, at);
      const e = order[k];
      if (
        e !== undefined &&
        this.prefixes[e] === want &&
        this.offsets[e] === at &&
        this.lengths[e] === length
      ) {
        return at;
      }
    }
    for (
      let k = this.lowerBound(order, want, -1);
      k < order.length && this.prefixes[order[k]!] === want;
      k++
    ) {
      if (this.lengths[order[k]!] === length) return this.offsets[order[k]!];
    }
    return undefined;
  }
}

/**
 * How many of a sample's chunks (hash and length) the indexes hold, in one pass over each
 * index's bytes: no SeedMap (whose build and sort cost a download of nothing reused about half
 * a second of a loaded core, bench:delta's "nothing" case), no allocation per entry. A bit per
 * 24-bit hash prefix says which entries can be in the sample (a few hundred false hits in a
 * million-chunk index, for a sample of thousands): only those are read as a 48-bit prefix and
 * looked up, and a hit is confirmed on the whole hash and the length; each sample entry counts
 * once.
 */
export function countHeld(
  sample: readonly { hash: Uint8Array; length: number }[],
  indexes: readonly ChunkIndex[],
): number {
  const byPrefix = new Map<number, number[]>();
  const bits = new Uint8Array(1 << 21);
  sample.forEach((c, k) => {
    const p = prefixOf(c.hash);
    const list = byPrefix.get(p);
    if (list) list.push(k);
    else byPrefix.set(p, [k]);
    const b = (c.hash[0]! << 16) | (c.hash[1]! << 8) | c.hash[2]!;
    bits[b >>> 3] = bits[b >>> 3]! | (1 << (b & 7));
  });
  const held = new Uint8Array(sample.length);
  let n = 0;
  for (const index of indexes) {
    const b = index.bytes;
    for (let i = 0; i < index.count && n < sample.length; i++) {
      const at = INDEX_HEADER + i * INDEX_ENTRY;
      const p24 = (b[at + 12]! << 16) | (b[at + 13]! << 8) | b[at + 14]!;
      if ((bits[p24 >>> 3]! & (1 << (p24 & 7))) === 0) continue;
      const list = byPrefix.get(b.readUIntBE(at + 12, 6));
      if (list === undefined) continue;
      const length = b.readUInt32BE(at + 8);
      const hash = b.subarray(at + 12, at + 44);
      for (const k of list) {
        const c = sample[k]!;
        if (held[k] === 0 && c.length === length && Buffer.compare(hash, c.hash) === 0) {
          held[k] = 1;
          n++;
        }
      }
    }
  }
  return n;
}
