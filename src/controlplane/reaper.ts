// Stops a control plane when the process that owns it dies (a test runner killed with
// SIGKILL cannot clean up after itself). Usage: reaper.ts OWNER_PID NAME
import { setTimeout as sleep } from "node:timers/promises";
import { existsSync } from "node:fs";
import { down, stateFileOf } from "./instance.js";
import { pidAlive } from "./lock.js";

const owner = Number(process.argv[2]);
const name = process.argv[3] ?? "";
/** Polling the owner once a second bounds how long an orphan lives. */
const POLL_MS = 1000;

// Started before the control plane, so a runner killed halfway through `up` is covered too.
while (pidAlive(owner)) await sleep(POLL_MS);
// A record that cannot be read is still a control plane to stop: down() finds its processes.
if (existsSync(stateFileOf(name))) await down(name);
