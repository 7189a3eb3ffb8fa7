// The typed face of the native addon (native/). It validates and defaults every input so
// the C++ side can trust its arguments, and maps errno failures to liken's error family.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { LikenError } from "../errors.js";

export interface DeviceInfo {
  /** "block" for a block device or partition, "file" for a regular file. */
  kind: "block" | "file";
  /** Size in bytes: BLKGETSIZE64 for a block device, st_size for a file. */
  size: number;
  /** The alignment O_DIRECT I/O must respect (BLKSSZGET, or 4096 for files). */
  logicalBlockSize: number;
}

/** The raw writer object of native/writer.cc; use SlotWriter (writer.ts), never this. */
export interface RawWriter {
  push(buf: Buffer): number;
  space(): Promise<void>;
  checkpoint(): Promise<{ offset: number; hashState: Buffer }>;
  finish(): Promise<{ digest: string | null }>;
  abort(): void;
}

export interface RawWriterOptions {
  path: string;
  base: number;
  size: number;
  start: number;
  bufSize: number;
  nbuf: number;
  align: number;
  direct: boolean;
  chunkDigests?: Buffer;
  hashState?: Buffer;
}

interface NativeBinding {
  deviceInfo(path: string): DeviceInfo;
  discard(path: string, offset: number, length: number): boolean;
  fsyncPath(path: string): void;
  sdNotify(state: string): boolean;
  trimMemory(): boolean;
  setImmutable(path: string, on: boolean): boolean | null;
  readback(opts: {
    path: string;
    base: number;
    size: number;
    bufSize: number;
    align: number;
    direct: boolean;
  }): Promise<{ digest: string }>;
  Writer: new (opts: RawWriterOptions) => RawWriter;
  writerBufferBytes(): number;
}

/** The native module's error family: LIKEN_NATIVE_*, with the errno and syscall when known. */
export class NativeError extends LikenError {
  readonly errno: number | undefined;
  readonly syscall: string | undefined;
  readonly path: string | undefined;
  constructor(
    code: string,
    message: string,
    opts: {
      cause?: unknown;
      errno?: number;
      syscall?: string;
      path?: string;
      retryable?: boolean;
      context?: Record<string, unknown>;
    } = {},
  ) {
    super(code, message, {
      cause: opts.cause,
      retryable: opts.retryable ?? false,
      context: { ...opts.context, ...(opts.path !== undefined ? { path: opts.path } : {}) },
    });
    this.errno = opts.errno;
    this.syscall = opts.syscall;
    this.path = opts.path;
  }
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

let binding: NativeBinding | undefined;

/** Loads build/Release/liken_native.node once. `npm ci` builds it (the install script). */
export function native(): NativeBinding {
  if (binding) return binding;
  const require = createRequire(import.meta.url);
  const file = path.join(root, "build", "Release", "liken_native.node");
  try {
    binding = require(file) as NativeBinding;
  } catch (cause) {
    throw new NativeError(
      "LIKEN_NATIVE_NOT_BUILT",
      `the native addon ${file} could not be loaded; run \`npm ci\` (or \`npx node-gyp rebuild\`) and read the compiler's message`,
      { cause },
    );
  }
  return binding;
}

export function wrapErrno(cause: unknown, what: string): NativeError {
  const e = cause as { errno?: number; syscall?: string; path?: string; message?: string };
  return new NativeError("LIKEN_NATIVE_IO", `${what}: ${e.message ?? String(cause)}`, {
    cause,
    ...(e.errno !== undefined ? { errno: e.errno } : {}),
    ...(e.syscall !== undefined ? { syscall: e.syscall } : {}),
    ...(e.path !== undefined ? { path: e.path } : {}),
  });
}

/** Size and alignment of a block device, partition or regular file. */
export function deviceInfo(devicePath: string): DeviceInfo {
  if (typeof devicePath !== "string" || devicePath.length === 0) {
    throw new NativeError("LIKEN_NATIVE_BAD_ARGUMENT", "deviceInfo: a non-empty path is required");
  }
  try {
    return native().deviceInfo(path.resolve(devicePath));
  } catch (cause) {
    if (cause instanceof NativeError) throw cause;
    throw wrapErrno(cause, `cannot read the size of ${devicePath}`);
  }
}

function requirePath(fn: string, p: unknown): string {
  if (typeof p !== "string" || p.length === 0) {
    throw new NativeError("LIKEN_NATIVE_BAD_ARGUMENT", `${fn}: a non-empty path is required`);
  }
  return path.resolve(p);
}

/**
 * Discards a byte range of a block device (BLKDISCARD) or punches a hole in a file, so the
 * medium no longer holds what was there. Offset and length must be multiples of 4096.
 */
export function discard(devicePath: string, offset: number, length: number): void {
  const p = requirePath("discard", devicePath);
  for (const [k, v] of [
    ["offset", offset],
    ["length", length],
  ] as const) {
    if (!Number.isSafeInteger(v) || v < 0 || v % 4096 !== 0) {
      throw new NativeError(
        "LIKEN_NATIVE_BAD_ARGUMENT",
        `discard: ${k} ${v} must be a non-negative multiple of 4096`,
      );
    }
  }
  try {
    native().discard(p, offset, length);
  } catch (cause) {
    throw wrapErrno(cause, `cannot discard ${length} bytes at ${offset} of ${devicePath}`);
  }
}

/** fsync(2) of a file, block device or directory by path. */
export function fsyncPath(target: string): void {
  const p = requirePath("fsyncPath", target);
  try {
    native().fsyncPath(p);
  } catch (cause) {
    throw wrapErrno(cause, `cannot sync ${target}`);
  }
}

/**
 * Sets (`on`) or clears the immutable attribute of a file (chattr +i / -i) and returns whether
 * it was set before; null when the filesystem has no attribute flags (nothing to clear).
 * efivarfs marks the variables it does not know immutable (see src/bootloader/efivars.ts).
 */
export function setImmutable(target: string, on: boolean): boolean | null {
  const p = requirePath("setImmutable", target);
  try {
    return native().setImmutable(p, on === true);
  } catch (cause) {
    throw wrapErrno(cause, `cannot ${on ? "set" : "clear"} the immutable attribute of ${target}`);
  }
}

/**
 * Returns the malloc arenas' free pages to the kernel (glibc's malloc_trim(0)): a daemon calls
 * it once its start-up or a large step is over, so memory it no longer uses leaves its RSS.
 * True when some was released. Cheap (a walk of the arenas), never needed for correctness.
 */
export function trimMemory(): boolean {
  return native().trimMemory();
}

/**
 * Sends `state` (for example "READY=1", "WATCHDOG=1", "STATUS=downloading") to systemd over
 * $NOTIFY_SOCKET, as sd_notify(3) does. Returns false when no socket is set (not run by
 * systemd with Type=notify), true once the datagram is sent.
 */
export function sdNotify(state: string): boolean {
  if (typeof state !== "string" || state.length === 0) {
    throw new NativeError("LIKEN_NATIVE_BAD_ARGUMENT", "sdNotify: a non-empty state is required");
  }
  try {
    return native().sdNotify(state);
  } catch (cause) {
    throw wrapErrno(cause, "cannot notify systemd");
  }
}
