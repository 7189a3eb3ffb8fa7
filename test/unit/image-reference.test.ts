import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../src/controlplane/paths.js";
import { isLikenError } from "../../src/errors.js";
import {
  deploymentImage,
  operatorImage,
  parseReference,
} from "../../src/operator-image/reference.js";

describe("image reference", () => {
  it.each([
    ["ghcr.io/liken-sh/liken:0.1.0", "ghcr.io/liken-sh/liken", "0.1.0"],
    ["localhost:5000/liken:dev", "localhost:5000/liken", "dev"],
    ["liken:1", "liken", "1"],
  ])("%s is %s at tag %s", (ref, repository, tag) => {
    expect(parseReference(ref)).toEqual({ repository, tag });
  });

  it.each(["ghcr.io/liken-sh/liken", "ghcr.io/x/liken@sha256:abc", "localhost:5000/liken", ""])(
    "%s is refused: the build writes a tag",
    (ref) => {
      expect(() => parseReference(ref)).toThrow(
        expect.objectContaining({ code: "LIKEN_IMAGE_BAD_REFERENCE" }),
      );
    },
  );

  it("the Deployment runs the image this checkout builds: its tag is the package version", () => {
    const img = operatorImage(REPO_ROOT);
    expect(img.ref).toBe(
      deploymentImage(path.join(REPO_ROOT, "config", "operator", "deployment.yaml")),
    );
    expect(img.tag).toBe(img.version);
  });

  it("a Deployment tag other than the package version is refused with the fix", () => {
    const root = mkdtempSync(path.join(tmpdir(), "liken-image-"));
    mkdirSync(path.join(root, "config", "operator"), { recursive: true });
    writeFileSync(path.join(root, "package.json"), JSON.stringify({ version: "0.2.0" }));
    const deployment = readFileSync(
      path.join(REPO_ROOT, "config", "operator", "deployment.yaml"),
      "utf8",
    );
    writeFileSync(path.join(root, "config", "operator", "deployment.yaml"), deployment);
    try {
      operatorImage(root);
      expect.unreachable();
    } catch (e) {
      expect(isLikenError(e, "LIKEN_IMAGE_TAG_MISMATCH")).toBe(true);
      expect((e as Error).message).toContain("set the Deployment's image to");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
