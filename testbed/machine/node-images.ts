// The container images a liken node loads offline at boot (node.ts's load-images), as OCI
// archives built here with umoci (the pinned, cached tool) and tar: no registry, no daemon.
// Each holds one static binary: the pause binary as the sandbox image, the same binary as the
// scenario's workload (it stops at once on SIGTERM), and the DRA test driver.
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureTool } from "../../src/controlplane/tools.js";
import { ROOT, run } from "./cache.js";

export interface NodeImage {
  /** The name pods ask for (imagePullPolicy: Never). */
  ref: string;
  /** The binary's path in the image, and its entrypoint. */
  path: string;
  /** Where the binary comes from on the host. */
  from: string;
}

/** An OCI archive per image, in `work`; returns their paths. */
export async function buildNodeImages(
  work: string,
  images: readonly NodeImage[],
  log: (s: string) => void,
): Promise<string[]> {
  const umoci = await ensureTool("umoci", log);
  const out: string[] = [];
  for (const [i, img] of images.entries()) {
    const dir = join(work, `image-${i}`);
    const layout = join(dir, "layout");
    const tree = join(dir, "tree");
    mkdirSync(join(tree, img.path.slice(1).split("/").slice(0, -1).join("/")), {
      recursive: true,
    });
    copyFileSync(img.from, join(tree, img.path.slice(1)));
    chmodSync(join(tree, img.path.slice(1)), 0o755);
    const tag = img.ref.slice(img.ref.lastIndexOf(":") + 1);
    const at = `${layout}:${tag}`;
    run(umoci, ["init", "--layout", layout]);
    run(umoci, ["new", "--image", at]);
    run(umoci, ["insert", "--image", at, tree, "/"]);
    run(umoci, [
      "config",
      "--image",
      at,
      "--os",
      "linux",
      "--architecture",
      "amd64",
      "--config.entrypoint",
      img.path,
    ]);
    // containerd's import names an image by this annotation of the index (umoci writes only
    // the tag, org.opencontainers.image.ref.name).
    const indexFile = join(layout, "index.json");
    const index = JSON.parse(readFileSync(indexFile, "utf8")) as {
      manifests: { annotations?: Record<string, string> }[];
    };
    for (const m of index.manifests) {
      m.annotations = { ...m.annotations, "io.containerd.image.name": img.ref };
    }
    writeFileSync(indexFile, JSON.stringify(index));
    run(umoci, ["gc", "--layout", layout]);
    const archive = join(work, `${img.ref.replace(/[^a-z0-9.-]+/g, "_")}.tar`);
    run("tar", [
      "--create",
      "--file",
      archive,
      "--directory",
      layout,
      "--sort=name",
      "--owner=0",
      "--group=0",
      "--numeric-owner",
      "oci-layout",
      "index.json",
      "blobs",
    ]);
    out.push(archive);
  }
  return out;
}

/** testbed/machine/workload.c, compiled static (no libc in its image), into `work`. */
export function workloadBinary(work: string): string {
  const out = join(work, "workload");
  run("cc", [
    "-Os",
    "-Wall",
    "-Werror",
    "-static",
    "-o",
    out,
    join(ROOT, "testbed/machine/workload.c"),
  ]);
  run("strip", [out]);
  return out;
}
