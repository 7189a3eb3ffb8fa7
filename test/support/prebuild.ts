// Starts prebuild-main.ts beside a test tier, niced, in its own process group, with its
// output in a log file; the returned function waits for it to end.
import { spawn } from "node:child_process";
import { mkdirSync, openSync, closeSync } from "node:fs";
import path from "node:path";
import { cacheRoot, REPO_ROOT } from "../../src/controlplane/paths.js";

/** Lowest priority: the tests' own processes always come first. */
const NICE = "19";

export function startPrebuild(log: (line: string) => void): () => Promise<void> {
  mkdirSync(cacheRoot(), { recursive: true });
  const logFile = path.join(cacheRoot(), "prebuild.log");
  const out = openSync(logFile, "w");
  const child = spawn(
    "nice",
    [
      "-n",
      NICE,
      process.execPath,
      "--import",
      "tsx",
      path.join(REPO_ROOT, "test", "support", "prebuild-main.ts"),
      String(process.pid),
    ],
    { detached: true, stdio: ["ignore", out, out], cwd: REPO_ROOT },
  );
  closeSync(out);
  const ended = new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.once("error", (e) => {
      log(`liken: prebuild not started (${e.message}); each tier builds what it needs`);
      resolve();
    });
  });
  log(`liken: building the later tiers' tools in the background (log: ${logFile})`);
  return async () => {
    const started = Date.now();
    const note = setTimeout(
      () => log(`liken: waiting for the background build (log: ${logFile})`),
      1000,
    );
    await ended;
    clearTimeout(note);
    const s = Math.round((Date.now() - started) / 1000);
    if (s > 1) log(`liken: background build ended after ${s} s more`);
  };
}
