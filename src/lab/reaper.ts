// Waits for a lab to die, then ends what it left (reap.ts). Usage: reaper.ts LAB_PID START.
// Started by the lab itself, in its own process group; the lab stops it after a clean stop.
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { LAB_REAPER_LOG } from "./paths.js";
import { isRunning, readClaim, reapLab, releaseClaim } from "./reap.js";

const owner = { pid: Number(process.argv[2]), start: process.argv[3] ?? "" };
/** Polling the lab twice a second bounds how long its orphans live. */
const POLL_MS = 500;

while (isRunning(owner)) await sleep(POLL_MS);
// A lab that stopped cleanly gave its claim up; a new lab that claimed the place reaped first.
const claim = readClaim();
if (claim?.pid === owner.pid && claim.start === owner.start) {
  const ended = await reapLab();
  releaseClaim(owner);
  // No stdio (a broken pipe must not stop it): what it did goes to a file.
  appendFileSync(
    LAB_REAPER_LOG,
    `${new Date().toISOString()} lab pid ${owner.pid} ended without stopping: reaped its control plane and ${ended} processes\n`,
  );
}
