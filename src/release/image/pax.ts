// Extended attributes from a layer tar's PAX records. GNU tar and Go's archive/tar (buildah,
// umoci, skopeo) write each as `SCHILY.xattr.<name>=<raw bytes>`; libarchive may write
// `LIBARCHIVE.xattr.<url-encoded name>=<base64>`. tar-stream 3 decodes every PAX value as
// UTF-8, which loses a binary value's bytes (security.capability of CAP_SETUID holds 0x80), so
// its decodePax is replaced here, once, by one that decodes the xattr records byte for byte
// (latin1: one character per byte) and every other record (path, linkpath...) as UTF-8.
import { createRequire } from "node:module";
import path from "node:path";

export interface Xattr {
  name: string;
  value: Buffer;
}

const SCHILY = "SCHILY.xattr.";
const LIBARCHIVE = "LIBARCHIVE.xattr.";

/** PAX records (`<len> <key>=<value>\n`), xattr values byte for byte. */
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
    const key = rec.subarray(0, eq).toString("utf8");
    const raw = rec.subarray(eq + 1);
    out[key] = key.startsWith(SCHILY) ? raw.toString("latin1") : raw.toString("utf8");
    rest = rest.subarray(len);
  }
  return out;
}

/** The entry's extended attributes, sorted by name (the order they are written in). */
export function xattrsOf(pax: Record<string, string> | undefined | null): Xattr[] {
  const out: Xattr[] = [];
  for (const [k, v] of Object.entries(pax ?? {})) {
    if (k.startsWith(SCHILY))
      out.push({ name: k.slice(SCHILY.length), value: Buffer.from(v, "latin1") });
    else if (k.startsWith(LIBARCHIVE))
      out.push({
        name: decodeURIComponent(k.slice(LIBARCHIVE.length)),
        value: Buffer.from(v, "base64"),
      });
  }
  return out.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
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
