// An OCI image from a Containerfile, with no registry and no daemon: buildah on vfs storage in
// a temporary directory (its --root and --runroot, removed afterwards), chroot isolation (no
// runtime, no cgroups), `--timestamp` for the layers' and config's times, and the result
// written into an OCI layout directory (`oci:<dir>:<name>`) that `liken release build
// --from-image` reads. The base of a Containerfile's FROM is made here too: a root filesystem
// directory (mmdebstrap's, say) imported as one uncompressed layer by umoci.
//
// Layers are left uncompressed (buildah push -D, umoci --compress none): the layout is a build
// product read once on the same machine, and gzip of a 450 MB root filesystem would cost more
// than the whole release build. Every failure names the step, the tool's own message and what
// to do (LIKEN_IMAGE_BUILD).
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { imageError } from "./errors.js";

export interface ToolRun {
  cmd: string;
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
}

/** Runs a tool; a failure (or a missing tool) names `step`, the command and its stderr. */
export function runTool(step: string, t: ToolRun): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(t.cmd, t.args, {
      stdio: ["ignore", "pipe", "pipe"],
      cwd: t.cwd,
      env: { ...process.env, LC_ALL: "C", ...t.env },
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (err += b.toString()));
    const fail = (why: string, cause?: unknown): void =>
      reject(
        imageError(
          "LIKEN_IMAGE_BUILD",
          `${step}: \`${t.cmd} ${t.args.join(" ")}\` ${why}`,
          { step, cmd: t.cmd },
          cause,
        ),
      );
    child.on("error", (e: NodeJS.ErrnoException) =>
      fail(
        e.code === "ENOENT"
          ? `: ${t.cmd} is not installed (testbed/setup-debian.sh installs buildah and skopeo; umoci is built by liken into ~/.cache/liken/tools)`
          : `could not start: ${e.message}`,
        e,
      ),
    );
    child.on("close", (code, signal) => {
      if (code === 0) resolve(out);
      else
        fail(
          `failed (${signal ?? `exit ${code}`}): ${err.trim().split("\n").slice(-8).join("\n") || "(no message)"}`,
        );
    });
  });
}

/** `YYYY-MM-DDTHH:MM:SSZ` of a SOURCE_DATE_EPOCH. */
export function isoOf(epoch: number): string {
  return new Date(epoch * 1000).toISOString().replace(/\.000Z$/, "Z");
}

export interface ImportOptions {
  /** The root filesystem, a directory (read as root: owners, modes, xattrs as they are). */
  rootfs: string;
  /** The OCI layout directory (made when missing) and the image's name in it. */
  layout: string;
  name: string;
  /** umoci's path (src/controlplane/tools.ts ensureTool("umoci")). */
  umoci: string;
  sourceDateEpoch: number;
  labels?: Record<string, string>;
  /** Scratch space for the layer tarball (default: beside the layout). */
  workDir?: string;
}

/**
 * A root filesystem directory as a one-layer OCI image `oci:<layout>:<name>`: tar with sorted
 * names, numeric owners, mtimes clamped to the epoch and extended attributes, added by umoci
 * with the config's and history's times at the epoch.
 */
export async function importRootfs(o: ImportOptions): Promise<string> {
  const work = await mkdtemp(path.join(o.workDir ?? path.dirname(o.layout), ".liken-import-"));
  const created = isoOf(o.sourceDateEpoch);
  const image = `${o.layout}:${o.name}`;
  try {
    const tar = path.join(work, "layer.tar");
    await runTool(`import ${o.rootfs}: the layer tarball`, {
      cmd: "tar",
      args: [
        "-C",
        o.rootfs,
        "--sort=name",
        "--numeric-owner",
        "--xattrs",
        "--xattrs-include=*",
        `--mtime=@${o.sourceDateEpoch}`,
        "--clamp-mtime",
        "--format=pax",
        "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
        "-cf",
        tar,
        ".",
      ],
    });
    const umoci = (step: string, args: string[]): Promise<string> =>
      runTool(`import ${o.rootfs}: ${step}`, { cmd: o.umoci, args });
    await rm(path.join(o.layout, "index.json"), { force: true }).catch(() => undefined);
    await umoci("the layout", ["init", "--layout", o.layout]).catch(async (e: unknown) => {
      // An existing layout (another image in it) is fine: umoci init refuses only that.
      if (!String((e as Error).message).includes("exist")) throw e;
    });
    await umoci("the empty image", ["new", "--image", image]);
    await umoci("the layer", [
      "raw",
      "add-layer",
      "--compress",
      "none",
      "--history.created",
      created,
      "--image",
      image,
      tar,
    ]);
    await umoci("the config", [
      "config",
      "--image",
      image,
      "--created",
      created,
      "--history.created",
      created,
      ...Object.entries(o.labels ?? {}).flatMap(([k, v]) => ["--config.label", `${k}=${v}`]),
    ]);
    await umoci("unreferenced blobs", ["gc", "--layout", o.layout]);
    return `oci:${image}`;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

export interface BuildOptions {
  /** The Containerfile's text (written into the context as Containerfile.liken). */
  containerfile: string;
  /** The build context: what COPY and ADD read. */
  context: string;
  /**
   * Where buildah runs: FROM's `oci:<dir>:<name>` or `oci-archive:<file>` is read relative to
   * it. A relative path there is safest: buildah names its build container after the path, and
   * a path with a component starting with a dot (~/.cache) is not a valid name (buildah 1.28:
   * "invalid reference format").
   */
  cwd?: string;
  /** The OCI layout directory to write into (made when missing) and the image's name there. */
  layout: string;
  name: string;
}

export interface Buildah {
  /** Builds one image; returns its reference `oci:<layout>:<name>`. */
  build(o: BuildOptions): Promise<string>;
}

export interface BuildahOptions {
  /** Where buildah's temporary storage is made (removed when done). */
  workDir: string;
  /** Every layer's and the config's time (buildah --timestamp). */
  sourceDateEpoch: number;
  log?: (line: string) => void;
}

/**
 * Runs `f` with a buildah whose storage (vfs) lives in a temporary directory under `workDir`
 * for the whole session, so images built one FROM another share their layers, and removes it
 * afterwards whatever happened. No registry is asked: FROM names an `oci:` or `oci-archive:`
 * image, and --pull=missing never finds one missing afterwards.
 */
export async function withBuildah<T>(o: BuildahOptions, f: (b: Buildah) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(o.workDir, ".liken-buildah-"));
  const storage = [
    "--root",
    path.join(dir, "root"),
    "--runroot",
    path.join(dir, "runroot"),
    "--storage-driver",
    "vfs",
  ];
  // No user's or host's registries.conf, policy or storage.conf takes part.
  const env = {
    CONTAINERS_REGISTRIES_CONF: path.join(dir, "registries.conf"),
    CONTAINERS_STORAGE_CONF: path.join(dir, "storage.conf"),
    CONTAINERS_CONF: path.join(dir, "containers.conf"),
    BUILDAH_ISOLATION: "chroot",
    TMPDIR: dir,
  };
  await writeFile(env.CONTAINERS_REGISTRIES_CONF, "unqualified-search-registries = []\n");
  await writeFile(env.CONTAINERS_STORAGE_CONF, '[storage]\ndriver = "vfs"\n');
  await writeFile(env.CONTAINERS_CONF, "");
  const policy = path.join(dir, "policy.json");
  await writeFile(policy, '{"default":[{"type":"insecureAcceptAnything"}]}\n');
  let n = 0;
  const b: Buildah = {
    async build(bo) {
      const file = path.join(bo.context, "Containerfile.liken");
      await writeFile(file, bo.containerfile);
      const tag = `localhost/liken-build-${n++}`;
      const step = `buildah: ${bo.name} from ${file}`;
      o.log?.(`containerfile: building ${bo.name} (${bo.context})`);
      try {
        await runTool(step, {
          cmd: "buildah",
          args: [
            ...storage,
            "bud",
            "--signature-policy",
            policy,
            "--isolation",
            "chroot",
            "--pull=missing",
            "--timestamp",
            String(o.sourceDateEpoch),
            "--layers=false",
            "-f",
            file,
            "-t",
            tag,
            bo.context,
          ],
          env,
          cwd: bo.cwd ?? bo.context,
        });
        await runTool(`${step}: writing oci:${bo.layout}:${bo.name}`, {
          cmd: "buildah",
          args: [
            ...storage,
            "push",
            "--signature-policy",
            policy,
            "--disable-compression",
            tag,
            `oci:${bo.layout}:${bo.name}`,
          ],
          env,
        });
      } finally {
        await rm(file, { force: true });
      }
      return `oci:${bo.layout}:${bo.name}`;
    },
  };
  try {
    return await f(b);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
