// The operator image's name and tag come from one place: the Deployment in
// config/operator/deployment.yaml. The build names its image after it, so what `kubectl apply
// -k config/` asks for is what `npm run image` writes; the tag is the package version.
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { ImageError } from "./errors.js";

export interface ImageReference {
  /** registry/path, e.g. ghcr.io/liken-sh/liken */
  repository: string;
  tag: string;
}

/** Splits `registry/path:tag`; a digest or a missing tag is refused (the build writes a tag). */
export function parseReference(ref: string): ImageReference {
  const m = /^([a-z0-9][a-z0-9._\-/:]*[a-z0-9])(?::([A-Za-z0-9_][A-Za-z0-9._-]{0,127}))$/.exec(ref);
  if (!m || ref.includes("@") || m[1]!.endsWith(":")) {
    throw new ImageError(
      "LIKEN_IMAGE_BAD_REFERENCE",
      `image reference "${ref}" is not registry/name:tag; write it so in config/operator/deployment.yaml`,
    );
  }
  return { repository: m[1]!, tag: m[2]! };
}

/** The image of the cluster-operator container in the Deployment manifest at `file`. */
export function deploymentImage(file: string): string {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    const o = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: { name: string; image?: string }[] } } };
    } | null;
    if (o?.kind !== "Deployment") continue;
    const c = o.spec?.template?.spec?.containers?.find((x) => x.name === "cluster-operator");
    if (c?.image) return c.image;
  }
  throw new ImageError(
    "LIKEN_IMAGE_NO_DEPLOYMENT",
    `${file} holds no Deployment with a cluster-operator container and an image; the image build takes its name from there`,
  );
}

/**
 * The reference `npm run image` writes: the Deployment's, whose tag must be the package
 * version (a tag the build cannot produce would leave the Deployment pulling nothing).
 */
export function operatorImage(root: string): ImageReference & { ref: string; version: string } {
  const file = path.join(root, "config", "operator", "deployment.yaml");
  const ref = deploymentImage(file);
  const parsed = parseReference(ref);
  const { version } = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    version: string;
  };
  if (parsed.tag !== version) {
    throw new ImageError(
      "LIKEN_IMAGE_TAG_MISMATCH",
      `${file} runs ${ref}, but the image this checkout builds is tagged ${version} (package.json); set the Deployment's image to ${parsed.repository}:${version}`,
    );
  }
  return { ...parsed, ref, version };
}
