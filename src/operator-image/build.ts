// `npm run image`: the operator image, built with no container daemon. Two layers: Debian's
// Node.js runtime (base.ts, cached) and liken itself: one self-contained bundle of the CLI,
// the native addon, and the non-root user it runs as. umoci (built from the Go module proxy,
// tools.ts) writes the OCI image layout; tar packs it into an OCI archive, the format
// `skopeo copy oci-archive:` and `crane push` read.
import {
  chmodSync,
  copyFileSync,
  cpSync,
  mkdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { bundleModule } from "../cli/entry.js";
import { REPO_ROOT } from "../controlplane/paths.js";
import { ensureTool } from "../controlplane/tools.js";
import { BASE, BASE_TAG, ensureBase } from "./base.js";
import { ImageError } from "./errors.js";
import { IMAGE_BUNDLE } from "./bundle.js";
import { operatorImage } from "./reference.js";
import { phase, run, type Log } from "./run.js";

/** Where liken lives in the image: the bundle finds the addon and package.json from here. */
export const APP_DIR = "/opt/liken";
/** The user the image runs as: the Deployment's runAsUser (distroless's "nonroot" number). */
export const IMAGE_UID = 65532;

export interface BuiltImage {
  archive: string;
  ref: string;
  bytes: number;
  seconds: number;
}

/** The files of the upper layer, under `dir`. */
async function appTree(dir: string, version: string): Promise<void> {
  const app = path.join(dir, APP_DIR);
  // The bundle sits two levels under the app root, as src/cli/main.ts does under the checkout.
  const bundle = path.join(app, "dist", "cli", "liken.mjs");
  await bundleModule(path.join(REPO_ROOT, "src", "cli", "main.ts"), bundle, {
    overrides: IMAGE_BUNDLE,
  });
  chmodSync(bundle, 0o755);
  mkdirSync(path.join(app, "build", "Release"), { recursive: true });
  copyFileSync(
    path.join(REPO_ROOT, "build", "Release", "liken_native.node"),
    path.join(app, "build", "Release", "liken_native.node"),
  );
  // `liken --version` reads it; nothing else of the package is needed.
  writeFileSync(
    path.join(app, "package.json"),
    `${JSON.stringify({ name: "liken", version, type: "module", license: "Apache-2.0" }, null, 2)}\n`,
  );
  mkdirSync(path.join(dir, "usr", "local", "bin"), { recursive: true });
  symlinkSync(
    path.relative("/usr/local/bin", bundle.slice(dir.length)),
    path.join(dir, "usr/local/bin/liken"),
  );
  mkdirSync(path.join(dir, "etc"), { recursive: true });
  writeFileSync(
    path.join(dir, "etc", "passwd"),
    `root:x:0:0:root:/root:/usr/sbin/nologin\nliken:x:${IMAGE_UID}:${IMAGE_UID}:liken:/nonexistent:/usr/sbin/nologin\n`,
  );
  writeFileSync(path.join(dir, "etc", "group"), `root:x:0:\nliken:x:${IMAGE_UID}:\n`);
}

export async function buildImage(
  log: Log,
  opts: { out?: string; refreshBase?: boolean } = {},
): Promise<BuiltImage> {
  const started = Date.now();
  if (process.getuid?.() !== 0) {
    // Every file in the image must belong to root (the image runs as 65532 and must not be
    // able to change its own program); mmdebstrap and umoci keep owners only when run as root.
    throw new ImageError(
      "LIKEN_IMAGE_NOT_ROOT",
      `building the image needs root (uid ${String(process.getuid?.())} here): mmdebstrap and umoci keep the files' owners only as root; run \`sudo npm run image\``,
    );
  }
  const image = operatorImage(REPO_ROOT);
  const out = opts.out ?? path.join(REPO_ROOT, "out");
  const archive = path.join(out, `liken-${image.tag}.oci.tar`);
  const umoci = await ensureTool("umoci", log);
  const base = await ensureBase(umoci, log, opts.refreshBase);

  const staging = path.join(out, `.staging-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  try {
    const layout = path.join(staging, "layout");
    const tree = path.join(staging, "app");
    await phase("bundle liken (esbuild) and the native addon", log, () =>
      appTree(tree, image.version),
    );
    await phase(`image ${image.ref} (umoci)`, log, async () => {
      cpSync(base, layout, { recursive: true });
      const img = `${layout}:${image.tag}`;
      await run("umoci config", umoci, [
        "config",
        "--image",
        `${layout}:${BASE_TAG}`,
        "--tag",
        image.tag,
        "--os",
        "linux",
        "--architecture",
        "amd64",
        "--config.entrypoint",
        "liken",
        "--config.user",
        `${IMAGE_UID}:${IMAGE_UID}`,
        "--config.env",
        "PATH=/usr/local/bin:/usr/bin",
        "--config.workingdir",
        "/",
        // The Deployment's `metrics` port (liken operator --metrics-address=:8080).
        "--config.exposedports",
        "8080/tcp",
        "--config.label",
        `org.opencontainers.image.version=${image.version}`,
        "--config.label",
        "org.opencontainers.image.title=liken",
        "--config.label",
        "org.opencontainers.image.licenses=Apache-2.0",
        "--config.label",
        `org.opencontainers.image.base.name=debian:${BASE.suite} (${BASE.packages.join(", ")})`,
        "--history.created_by",
        "liken: entrypoint, user",
      ]);
      await run("umoci insert", umoci, [
        "insert",
        "--image",
        img,
        "--history.created_by",
        `liken ${image.version}: ${APP_DIR} (CLI bundle, native addon), /usr/local/bin/liken, user ${IMAGE_UID}`,
        tree,
        "/",
      ]);
      await run("umoci rm", umoci, ["rm", "--image", `${layout}:${BASE_TAG}`]);
      await run("umoci gc", umoci, ["gc", "--layout", layout]);
    });
    await phase(`archive ${archive}`, log, async () => {
      const tmp = `${archive}.tmp`;
      await run("tar", "tar", [
        "--create",
        "--file",
        tmp,
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
      renameSync(tmp, archive);
    });
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return {
    archive,
    ref: image.ref,
    bytes: statSync(archive).size,
    seconds: (Date.now() - started) / 1000,
  };
}
