// `npm run helm -- <args>`: the pinned Helm (v4, built from the Go module proxy and cached by
// src/controlplane/tools.ts on first use), with the arguments as given. Wiring only.
import { spawnSync } from "node:child_process";
import { ensureTool } from "../controlplane/tools.js";

const helm = await ensureTool("helm");
const r = spawnSync(helm, process.argv.slice(2), { stdio: "inherit" });
if (r.error !== undefined) {
  process.stderr.write(`helm: ${r.error.message}\n`);
  process.exitCode = 1;
} else {
  process.exitCode = r.status ?? 1;
}
