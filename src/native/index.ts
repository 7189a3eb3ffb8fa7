// The typed face of the native addon (native/). It validates and defaults every input so
// the C++ side can trust its arguments, and maps errno failures to liken's error family.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

export interface DeviceInfo {
  /** "block" for a block device or partition, "file" for a regular file. */
  kind: "block" | "file";
  /** Size in bytes: BLKGETSIZE64 for a block device, st_size for a file. */
  size: number;
  /** The alignment O_DIRECT I/O must respect (BLKSSZGET, or 4096 for files). */
  logicalBlockSize: number;
}

interface NativeBinding {
  deviceInfo(path: string): DeviceInfo;
}

export class NativeError extends Error {
  readonly code: string;
  readonly errno: number | undefined;
  readonly syscall: string | undefined;
  readonly path: string | undefined;
  constructor(
    code: string,
    message: string,
    opts: { cause?: unknown; errno?: number; syscall?: string; path?: string } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = "NativeError";
    this.code = code;
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

function wrapErrno(cause: unknown, what: string): NativeError {
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
