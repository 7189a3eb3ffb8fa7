// zstd for release packs (docs/adr/release-packs-zstd.md): the reference C library compiled to
// WebAssembly (@bokuweb/zstd-wasm), loaded once, no build step and no download at install.
// A frame is decoded into at most the length its chunk has in the index: a frame that
// declares more, or inflates past it, is refused there (a decompression bomb is cut at the
// chunk's length, never allocated).
// A static import, so that the agent package's bundle inlines the codec (a machine has no
// node_modules); its init() reads zstd.wasm beside its own file (`__dirname`), which the
// package ships beside the bundle (testbed/package-agent.ts).
import * as codec from "@bokuweb/zstd-wasm";
import { VerifyError } from "./errors.js";

interface Zstd {
  init(): Promise<void>;
  compress(b: Uint8Array, level?: number): Uint8Array;
  decompress(b: Uint8Array, o?: { defaultHeapSize?: number }): Uint8Array;
}

let loaded: Promise<Zstd> | undefined;

/** The codec, its WebAssembly instantiated on first use. */
export function zstd(): Promise<Zstd> {
  loaded ??= (async () => {
    const z: Zstd = codec;
    await z.init();
    return z;
  })();
  return loaded;
}

/** zstd's error codes (zstd_errors.h) that a hostile frame can cause. */
const ZSTD_ERRORS: Record<number, string> = {
  10: "prefix unknown (not a zstd frame)",
  12: "version unsupported",
  14: "frame parameter unsupported",
  16: "window too large",
  20: "corruption detected",
  22: "checksum wrong",
  70: "output larger than the chunk",
  72: "compressed size wrong",
};

export const FRAME_MAGIC = 0xfd2fb528;

/**
 * The content size a zstd frame header declares: a number, "unknown" (no size field), or
 * "invalid" (not a zstd frame header). RFC 8878, 3.1.1.1.
 */
export function frameContentSize(f: Uint8Array): number | "unknown" | "invalid" {
  if (f.length < 6) return "invalid";
  const b = Buffer.from(f.buffer, f.byteOffset, f.length);
  if (b.readUInt32LE(0) !== FRAME_MAGIC) return "invalid";
  const fhd = b[4]!;
  const fcsFlag = fhd >> 6;
  const single = (fhd >> 5) & 1;
  if ((fhd >> 3) & 1) return "invalid"; // reserved bit
  const dictBytes = [0, 1, 2, 4][fhd & 3]!;
  const fcsBytes = [single ? 1 : 0, 2, 4, 8][fcsFlag]!;
  const at = 5 + (single ? 0 : 1) + dictBytes;
  if (fcsBytes === 0) return "unknown";
  if (b.length < at + fcsBytes) return "invalid";
  switch (fcsBytes) {
    case 1:
      return b[at]!;
    case 2:
      return b.readUInt16LE(at) + 256;
    case 4:
      return b.readUInt32LE(at);
    default: {
      const v = b.readBigUInt64LE(at);
      return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
    }
  }
}

/**
 * Decodes one frame that must give `length` bytes. Throws LIKEN_VERIFY_FRAME_INVALID with the
 * fault ("not-zstd", "bomb", "corrupt", "short") otherwise; nothing larger than `length` is
 * ever allocated for the output.
 */
export async function decodeFrame(
  frame: Uint8Array,
  length: number,
  what: string,
): Promise<Buffer> {
  const z = await zstd();
  const fail = (fault: string, message: string): never => {
    throw new VerifyError("LIKEN_VERIFY_FRAME_INVALID", `${what}: ${message}`, {
      context: { what, fault },
    });
  };
  const declared = frameContentSize(frame);
  if (declared === "invalid") fail("not-zstd", "is not a zstd frame");
  if (typeof declared === "number" && declared > length) {
    fail("bomb", `declares ${declared} bytes, its chunk has ${length}: cut, not decoded`);
  }
  let out: Uint8Array;
  // The library says "Failed to compress with code -N" for any decode error: name N.
  const why = (e: unknown): string => {
    const code = /code (-?\d+)/.exec((e as Error).message)?.[1];
    const name = code === undefined ? undefined : ZSTD_ERRORS[Math.abs(Number(code))];
    return name === undefined ? (e as Error).message : `zstd: ${name}`;
  };
  try {
    // Without a declared size the library allocates this capacity and stops at it.
    out = z.decompress(frame, { defaultHeapSize: length });
  } catch (e) {
    return fail(
      declared === "unknown" ? "bomb" : "corrupt",
      declared === "unknown"
        ? `does not decode within its chunk's ${length} bytes (${why(e)}): cut at the length`
        : `does not decode (${why(e)})`,
    );
  }
  if (out.length !== length)
    fail("short", `decodes to ${out.length} bytes, its chunk has ${length}`);
  return Buffer.from(out.buffer, out.byteOffset, out.length);
}

/** zstd's default level (desync's too): level 19 compresses a 4 KiB chunk in 0.85 ms, a
 * 516 MiB image in about two minutes; level 3 at 64 MB/s (docs/adr/release-packs-zstd.md). */
export const PACK_LEVEL = 3;

export async function encodeFrame(chunk: Uint8Array, level = PACK_LEVEL): Promise<Buffer> {
  const z = await zstd();
  const out = z.compress(chunk, level);
  return Buffer.from(out.buffer, out.byteOffset, out.length);
}
