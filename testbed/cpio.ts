// A minimal writer of the cpio "newc" format the kernel unpacks as an initramfs
// (Documentation/driver-api/early-userspace/buffer-format.rst). Written here so the initramfs,
// device nodes included, is built without root and without the cpio tool.
import { gzipSync } from "node:zlib";

export type CpioEntry =
  | { path: string; kind: "dir"; mode?: number }
  | { path: string; kind: "file"; data: Buffer; mode?: number }
  | { path: string; kind: "symlink"; target: string }
  | { path: string; kind: "chardev"; major: number; minor: number; mode?: number };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;

function hex8(n: number): string {
  return n.toString(16).padStart(8, "0");
}

function pad4(n: number): Buffer {
  return Buffer.alloc((4 - (n % 4)) % 4);
}

function record(ino: number, name: string, mode: number, data: Buffer, rdev = [0, 0]): Buffer {
  const nameB = Buffer.from(`${name}\0`);
  const header = Buffer.from(
    "070701" +
      [ino, mode, 0, 0, 1, 0, data.length, 0, 0, rdev[0] ?? 0, rdev[1] ?? 0, nameB.length, 0]
        .map(hex8)
        .join(""),
    "latin1",
  );
  const h = Buffer.concat([header, nameB]);
  return Buffer.concat([h, pad4(h.length), data, pad4(data.length)]);
}

export function cpioNewc(entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  entries.forEach((e, i) => {
    const ino = i + 1;
    switch (e.kind) {
      case "dir":
        parts.push(record(ino, e.path, S_IFDIR | (e.mode ?? 0o755), Buffer.alloc(0)));
        break;
      case "file":
        parts.push(record(ino, e.path, S_IFREG | (e.mode ?? 0o644), e.data));
        break;
      case "symlink":
        parts.push(record(ino, e.path, S_IFLNK | 0o777, Buffer.from(e.target)));
        break;
      case "chardev":
        parts.push(
          record(ino, e.path, S_IFCHR | (e.mode ?? 0o600), Buffer.alloc(0), [e.major, e.minor]),
        );
        break;
      default: {
        const never: never = e;
        throw new Error(`unknown cpio entry ${JSON.stringify(never)}`);
      }
    }
  });
  parts.push(record(0, "TRAILER!!!", 0, Buffer.alloc(0)));
  return gzipSync(Buffer.concat(parts), { level: 6 });
}
