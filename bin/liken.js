#!/usr/bin/env node
// The `liken` command. A built tree (npm run build) runs from dist/. A source checkout runs
// the bundle the lab and the tests build (.lab/cli/liken.mjs, see src/cli/entry.ts)
// while no file under src/ is newer than it, and otherwise the TypeScript itself through tsx,
// so a fresh clone needs no build step and an edit is never hidden by an old bundle.
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const built = path.join(root, "dist", "cli", "main.js");
const bundle = path.join(root, ".lab", "cli", "liken.mjs");

/** The newest modification time of any file under dir (milliseconds). */
function newestUnder(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestUnder(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function bundleIsFresh() {
  try {
    return statSync(bundle).mtimeMs >= newestUnder(path.join(root, "src"));
  } catch {
    return false;
  }
}

if (existsSync(built)) {
  await import(built);
} else if (bundleIsFresh()) {
  await import(bundle);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import(new URL("../src/cli/main.ts", import.meta.url).href);
}
