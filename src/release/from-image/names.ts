// How liken holds a path name of an image: as its bytes. A layer's names (and symlink targets)
// are bytes, not text: a name that is not UTF-8 (a Latin-1 "café", written by a tool that knew
// no better) is still a name, and decoding it would turn every such byte into U+FFFD, so two
// names that differ in one byte would become one path and the other file would be lost. A
// name is therefore a "byte string": one character per byte (latin1), which keeps every byte,
// sorts in byte order, and is written back byte for byte (the debugfs script is latin1).
// Text that is not a name (a host path, a flag) is UTF-8 and converted where it meets names.

/** The bytes a name (a byte string) stands for. */
export const nameBytes = (name: string): Buffer => Buffer.from(name, "latin1");

/** Text (UTF-8: a host path, a flag, a label) as a byte string, to compare or write with names. */
export const textAsName = (text: string): string => Buffer.from(text, "utf8").toString("latin1");

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The name's text when its bytes are UTF-8, else undefined. */
export function utf8Text(name: string | Buffer): string | undefined {
  try {
    return utf8.decode(typeof name === "string" ? nameBytes(name) : name);
  } catch {
    return undefined;
  }
}

/**
 * A name for a person to read, in a refusal: its text when it is UTF-8, else its printable
 * ASCII with every other byte as \xNN (so the message names the exact bytes).
 */
export function shown(name: string | Buffer): string {
  const text = utf8Text(name);
  if (text !== undefined) return text;
  const bytes = typeof name === "string" ? nameBytes(name) : name;
  let out = "";
  for (const b of bytes) {
    out += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`;
  }
  return out;
}
