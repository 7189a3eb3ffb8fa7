// Builds, at the lowest CPU priority, the pinned tools the later tiers need: started by the
// integration tier's globalSetup (prebuild.ts) so that on a cold machine the Go builds run in
// the CPU the integration tests leave idle (they mostly wait on timers and watches) instead
// of one after the other in front of the tests that need them. Usage: prebuild-main.ts OWNER_PID
//
// Each build takes the same lock and writes the same completeness stamp as a test's own
// ensureTool(), so a test that needs a tool before it is ready waits for this build, and a
// build that fails here is simply done again (and reported) by the test that needs it.
import { setInterval } from "node:timers";
import { ensureNodeBinaries } from "../../src/controlplane/node-tools.js";
import { ensureTool, type Tool } from "../../src/controlplane/tools.js";
import { pidAlive } from "../../src/controlplane/lock.js";

/** In the order the tiers need them: integration, image, then the QEMU tier's node. */
const TOOLS_IN_ORDER: readonly Tool[] = ["prometheus", "promtool", "helm", "umoci", "runc"];
/** How soon a build stops after its owner dies (the reaper's poll, controlplane/reaper.ts). */
const POLL_MS = 1000;

const owner = Number(process.argv[2]);
const log = (line: string): void => {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`);
};

// This process leads its own process group (spawned detached): when the owner dies, the
// group goes, the Go builds with it, so nothing outlives the test run that started it.
setInterval(() => {
  if (!pidAlive(owner)) process.kill(-process.pid, "SIGKILL");
}, POLL_MS).unref();

for (const tool of TOOLS_IN_ORDER) {
  try {
    await ensureTool(tool, log);
  } catch (e) {
    log(`prebuild: ${tool} not built (the test that needs it builds it again): ${String(e)}`);
  }
}
try {
  await ensureNodeBinaries(log);
} catch (e) {
  log(`prebuild: the node binaries not built (the QEMU tier builds them again): ${String(e)}`);
}
