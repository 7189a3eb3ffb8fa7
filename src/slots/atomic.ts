// Replace a small file so that a crash at any point leaves the old bytes or the new ones:
// write a temp file, fsync it, rename it over, fsync the directory (AOSP's prefs do the same;
// a plain O_TRUNC write, as Flatcar's, is not atomic).
import { open, rename, rm } from "node:fs/promises";
import path from "node:path";
import { fsyncPath } from "../native/index.js";

export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp`);
  const fh = await open(tmp, "w", 0o644);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  fsyncPath(path.dirname(file));
}

/** Removes a file and syncs its directory, so the removal survives a power cut. */
export async function removeDurably(file: string): Promise<void> {
  await rm(file, { force: true });
  fsyncPath(path.dirname(file));
}
