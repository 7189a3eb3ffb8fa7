// A test file's scratch folders: made under the system's temp folder and removed when the file
// ends, whether its tests passed or not. The afterAll is registered when this module is first
// imported, in the importing file's root suite (vitest isolates each file's modules), so it
// runs once per file, after the file's own hooks have stopped what used the folders.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll } from "vitest";

/** The folders tempDir made for this test file, removed when it ends. */
const made: string[] = [];
afterAll(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A folder under the system's temp folder, removed when the test file ends. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
