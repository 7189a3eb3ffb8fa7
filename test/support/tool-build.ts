// A test that needs a pinned Go tool (src/controlplane/tools.ts: prometheus, promtool, helm,
// umoci...) waits for it in a hook of its own, with this deadline, before its scenario's hooks.
// On a warm machine the tool is on disk and the wait is nothing. On a cold one the tier's
// background build (prebuild.ts) builds the tools one after another beside the tests, niced,
// and a tool may come several minutes after the first test that needs it: 340 s for prometheus
// in a cold `.ci/run` on 2026-12-05, which a scenario hook of 120 s that built it itself did not
// survive. The scenario's own deadlines stay tight; only the build's wait is long.
import { beforeAll } from "vitest";
import { ensureTool, type Tool } from "../../src/controlplane/tools.js";

/** A cold build of one tool, waiting behind the others in the background build. */
export const TOOL_BUILD_MS = 1_800_000;

/**
 * Registers a beforeAll that waits for `tool` (built if missing) and hands its path to `use`.
 * Call it at the top of the file, before the hooks that use the tool.
 */
export function needsTool(tool: Tool, use: (bin: string) => void = () => undefined): void {
  beforeAll(async () => {
    use(await ensureTool(tool));
  }, TOOL_BUILD_MS);
}
