// Hand-made zstd frames (RFC 8878) for the hostile pack cases: a bomb of RLE blocks that
// inflates a few hundred bytes to `size`, with or without declaring that size in its header.
const MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
const MAX_BLOCK = 128 * 1024;

export function bombFrame(size: number, declare: boolean): Buffer {
  // Frame header: FCS_flag 3 (8 bytes) with a window descriptor; or no FCS at all.
  const header = declare
    ? Buffer.concat([Buffer.from([0xc0, 0x58]), u64(size)])
    : Buffer.from([0x00, 0x58]); // window descriptor 0x58: 2^21 bytes (a 128 KiB block fits)
  const blocks: Buffer[] = [];
  for (let left = size; left > 0; left -= MAX_BLOCK) {
    const n = Math.min(MAX_BLOCK, left);
    const last = left - n === 0 ? 1 : 0;
    const h = last | (1 << 1) | (n << 3); // RLE block
    blocks.push(Buffer.from([h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff, 0x41]));
  }
  return Buffer.concat([MAGIC, header, ...blocks]);
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}
