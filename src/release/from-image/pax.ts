// What liken reads from a layer tar's PAX records that tar-stream does not give as it is.
// Extended attributes: GNU tar and Go's archive/tar (buildah, umoci, skopeo) write each as
// `SCHILY.xattr.<name>=<raw bytes>`; libarchive may write
// `LIBARCHIVE.xattr.<url-encoded name>=<base64>`. tar-stream 3 decodes every PAX value as
// UTF-8, which loses a binary value's bytes (security.capability of CAP_SETUID holds 0x80) and
// a `path` that is not UTF-8 (Go writes a name that is not ASCII there, raw), so its decodePax
// is replaced here, once, by one that decodes every record byte for byte (latin1: one
// character per byte, as names are held: ./names.ts). Owners and times: Go's archive/tar writes
// a uid or gid that does not fit the header's octal field (2000000, a rootless build's) only as
// a PAX record, with 0 in the header; tar-stream applies none of them (paxNumber).
import { createRequire } from "node:module";
import path from "node:path";
import { imageError } from "./errors.js";
import { nameBytes, shown } from "./names.js";

export interface Xattr {
  name: string;
  value: Buffer;
}

const SCHILY = "SCHILY.xattr.";
const LIBARCHIVE = "LIBARCHIVE.xattr.";

/** PAX records (`<len> <key>=<value>\n`), keys and values byte for byte. */
export function decodePax(buf: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let rest = Buffer.from(buf);
  while (rest.length > 0) {
    const sp = rest.indexOf(0x20);
    if (sp <= 0) break;
    const len = Number.parseInt(rest.subarray(0, sp).toString("latin1"), 10);
    if (!Number.isInteger(len) || len <= sp || len > rest.length) break;
    const rec = rest.subarray(sp + 1, len - 1); // without the trailing "\n"
    const eq = rec.indexOf(0x3d);
    if (eq < 0) break;
    out[rec.subarray(0, eq).toString("latin1")] = rec.subarray(eq + 1).toString("latin1");
    rest = rest.subarray(len);
  }
  return out;
}

/** `%XX` escapes as the bytes they stand for (a byte string: the name may not be UTF-8). */
const unescapeBytes = (s: string): string =>
  s.replace(/%([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));

/**
 * The entry's extended attributes, sorted by name (the order they are written in). Names are
 * byte strings, as paths are (./names.ts).
 */
export function xattrsOf(pax: Record<string, string> | undefined | null): Xattr[] {
  const out: Xattr[] = [];
  for (const [k, v] of Object.entries(pax ?? {})) {
    if (k.startsWith(SCHILY))
      out.push({ name: k.slice(SCHILY.length), value: Buffer.from(v, "latin1") });
    else if (k.startsWith(LIBARCHIVE))
      out.push({
        name: unescapeBytes(k.slice(LIBARCHIVE.length)),
        value: Buffer.from(v, "base64"),
      });
  }
  return out.sort((a, b) => Buffer.compare(nameBytes(a.name), nameBytes(b.name)));
}

/** Largest uid or gid: ext4 and the kernel hold 32 bits, and 2^32-1 is "no owner" (-1). */
const MAX_ID = 0xfffffffe;

/**
 * A PAX record that is a number of the entry: `uid` and `gid` (a whole number up to MAX_ID),
 * `mtime` (seconds, maybe with a fraction or a sign: whole seconds, rounded down); undefined
 * when the entry has no such record. Refuses one that is not such a number, naming the entry.
 */
export function paxNumber(
  pax: Record<string, string> | undefined | null,
  key: "uid" | "gid" | "mtime",
  where: string,
): number | undefined {
  const v = pax?.[key];
  if (v === undefined) return undefined;
  const ok = key === "mtime" ? /^-?\d+(\.\d+)?$/.test(v) : /^\d+$/.test(v);
  const n = Math.floor(Number(v));
  if (!ok || (key !== "mtime" && n > MAX_ID)) {
    throw imageError(
      "LIKEN_IMAGE_LAYER_ENTRY",
      `${where}: the PAX record ${key}="${shown(v)}" is not ${key === "mtime" ? "a time in seconds" : `a whole number up to ${MAX_ID}`}: the layer is damaged or was written by a broken tool; rebuild it`,
      { record: key, value: shown(v) },
    );
  }
  return n;
}

let installed = false;

/** Puts decodePax into tar-stream's headers module (its extract calls it from there). */
export function installPaxDecoder(): void {
  if (installed) return;
  const require = createRequire(import.meta.url);
  const file = path.join(path.dirname(require.resolve("tar-stream")), "headers.js");
  const headers = require(file) as { decodePax: (b: Buffer) => Record<string, string> };
  headers.decodePax = decodePax;
  installed = true;
}
