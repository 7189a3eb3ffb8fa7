import path from "node:path";
import { describe, expect, it } from "vitest";
import { cacheRoot } from "../../src/controlplane/paths.js";
import {
  RECIPES,
  TOOLS,
  ensureTool,
  isTool,
  prometheusModuleVersion,
  toolPath,
} from "../../src/controlplane/tools.js";

describe("pinned tools", () => {
  it.each([
    ["3.16.0", "v0.316.0"],
    ["3.5.1", "v0.305.1"],
    ["2.53.4", "v0.253.4"],
  ])("Prometheus %s is the Go module version %s", (release, module) => {
    expect(prometheusModuleVersion(release)).toBe(module);
  });

  it("each tool is cached under its name and module version", () => {
    for (const t of TOOLS) {
      expect(toolPath(t)).toBe(path.join(cacheRoot(), "tools", t, RECIPES[t].version, t));
    }
  });

  it("only runc needs cgo; umoci (replace directives) and desync (an unlisted version) need a generated module", () => {
    expect(TOOLS.filter((t) => RECIPES[t].cgo)).toEqual(["runc"]);
    expect(TOOLS.filter((t) => RECIPES[t].replaces)).toEqual(["umoci", "desync"]);
  });

  it("an unknown tool is refused with the names it could build", async () => {
    expect(isTool("kubectl")).toBe(false);
    await expect(ensureTool("kubectl" as never, () => undefined)).rejects.toMatchObject({
      code: "LIKEN_CLUSTER_UNKNOWN_TOOL",
      message: expect.stringContaining("helm, promtool, prometheus, umoci, runc"),
    });
  });
});
