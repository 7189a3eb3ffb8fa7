// Does an artifact look compressed as a whole? Then no chunk of it survives a release (a
// changed byte near the start changes every compressed byte after it), and adaptive downloads
// fetch it whole. `liken release build` warns; docs/releases.md says how to build images that
// reuse well.

/** Every 16th 4 KiB block is sampled: a whole-image compressor leaves no block out, so a
 * sample of 1/16 tells as well as all of them and costs a 16th of the histogram work. */
export const SAMPLE_EVERY = 16;
export const BLOCK = 4096;
/** Bits a byte above which a 4 KiB block is "random". A 4 KiB sample of random bytes measures
 * about 7.95 (the estimate is biased low by 255/(2*4096*ln 2)); gzip -1 output falls to 7.6-7.9,
 * machine code and text measure 4.5-6.5. 7.5 separates them (measured on the machine image). */
export const RANDOM_BITS = 7.5;
/** Share of sampled blocks that must look random for the warning. Measured: the machine
 * image's ext4 root filesystem 0.039, the same image through gzip -1 0.991, the compressed
 * kernel 0.984, the gzip'd initrd 0.967. */
export const WARN_SHARE = 0.6;

/** Shannon entropy in bits a byte of one block. */
export function blockEntropy(b: Uint8Array): number {
  const counts = new Uint32Array(256);
  for (let i = 0; i < b.length; i++) counts[b[i]!]!++;
  let h = 0;
  for (const c of counts) {
    if (c === 0) continue;
    const p = c / b.length;
    h -= p * Math.log2(p);
  }
  return h;
}

/** Counts sampled blocks as they stream by (pieces of any size, in order). */
export class EntropySampler {
  private at = 0;
  sampled = 0;
  random = 0;

  private readonly block = Buffer.alloc(BLOCK);

  update(piece: Buffer): void {
    for (let off = 0; off < piece.length;) {
      const n = Math.floor(this.at / BLOCK);
      const inBlock = this.at % BLOCK;
      const take = Math.min(BLOCK - inBlock, piece.length - off);
      // Only every SAMPLE_EVERY-th block is copied (pieces may cut a block anywhere).
      if (n % SAMPLE_EVERY === 0) {
        piece.copy(this.block, inBlock, off, off + take);
        if (inBlock + take === BLOCK) {
          this.sampled++;
          if (blockEntropy(this.block) > RANDOM_BITS) this.random++;
        }
      }
      off += take;
      this.at += take;
    }
  }

  get share(): number {
    return this.sampled === 0 ? 0 : this.random / this.sampled;
  }

  /** True when the artifact is large enough to judge and looks compressed as a whole. */
  get looksCompressed(): boolean {
    return this.sampled >= 16 && this.share >= WARN_SHARE;
  }
}

/**
 * A Linux kernel image by its own header: x86's boot protocol ("HdrS" at 0x202, every bzImage,
 * EFI stub or not), an EFI zboot image ("zimg" at 4: arm64, riscv, loongarch compressed), the
 * arm64 and riscv Image headers (magic at 0x38). A bzImage or zboot image is compressed by how
 * the kernel is built and booted: nobody publishing a release can change that, so it draws no
 * warning (it is small, and fetched whole when it changes).
 */
export function isKernelImage(head: Buffer): boolean {
  const at = (off: number, magic: string): boolean =>
    head.length >= off + magic.length &&
    head.subarray(off, off + magic.length).toString("latin1") === magic;
  return at(0x202, "HdrS") || at(4, "zimg") || at(0x38, "ARM\x64") || at(0x38, "RSC\x05");
}

/** The bytes isKernelImage needs from the start of a file. */
export const KERNEL_HEAD = 0x240;

/**
 * What a person publishing `name` can do about it looking compressed, or undefined when nothing
 * (a kernel). The initrd is compressed by the tool that makes it, which can leave it plain.
 */
export function compressedAdvice(
  name: string,
  file: string,
  size: number,
  head: Buffer,
): string | undefined {
  if (name === "kernel" || isKernelImage(head)) return undefined;
  const what =
    name === "initrd"
      ? `Build the initrd uncompressed (initramfs-tools: COMPRESS=none in /etc/initramfs-tools/initramfs.conf, then update-initramfs -u; dracut: --no-compress)`
      : `Publish the filesystem uncompressed`;
  return (
    `artifact ${name} (${file}) looks compressed as a whole (high entropy): no chunk of it ` +
    `can be reused by the next release, every machine will fetch all ${size} bytes. ` +
    `${what} (the channel's HTTP may compress in transit), ` +
    `see "Images that reuse well" in docs/releases.md`
  );
}
