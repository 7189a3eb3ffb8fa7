// `liken release ...`: build a release directory, print a digest, print a catalog entry.
import { readFile } from "node:fs/promises";
import { Command, InvalidArgumentError } from "commander";
import {
  buildRelease,
  catalogEntry,
  ReleaseError,
  type ArtifactInput,
} from "../../release/build.js";
import { buildReleaseFromImage } from "../../release/from-image/from-image.js";
import { sizesLine } from "../../release/sizes.js";
import { digestOf } from "../../verify/digest.js";
import { fetchDocument } from "../../verify/fetch.js";
import { MAX_RELEASE_BYTES, parseRelease, releaseBase } from "../../verify/release.js";
import { parseSize } from "./size.js";
import { parseSource } from "./urls.js";
import { registerReleaseChannel } from "./release-channel.js";

function parseArtifact(v: string, prev: ArtifactInput[] = []): ArtifactInput[] {
  const m = /^([a-z0-9][a-z0-9-]*)=([^@]+)(?:@(\d+))?$/.exec(v);
  if (!m) throw new InvalidArgumentError(`"${v}" is not NAME=FILE[@OFFSET]`);
  return [
    ...prev,
    { name: m[1]!, file: m[2]!, ...(m[3] !== undefined ? { offset: Number(m[3]) } : {}) },
  ];
}

/** Reads release.yaml from an http(s) URL or a file (with the same size cap). */
async function readDocument(where: string): Promise<Buffer> {
  if (/^https?:\/\//.test(where)) return fetchDocument(new URL(where), MAX_RELEASE_BYTES);
  const b = await readFile(where);
  if (b.length > MAX_RELEASE_BYTES) {
    throw new ReleaseError(
      "LIKEN_RELEASE_TOO_LARGE",
      `${where}: ${b.length} bytes is more than a release.yaml may have`,
    );
  }
  return b;
}

export function registerRelease(program: Command): void {
  // Subcommands here take --version (a release version); without positional options the
  // program's own -v/--version would swallow it and print liken's version instead.
  program.enablePositionalOptions();
  const release = program
    .command("release")
    .description("Build and inspect releases (the channel's content)");

  release
    .command("build")
    .description(
      "Publish artifacts, or a container image's root filesystem, kernel and initrd, as a release " +
        "directory <out>/<version>/ and add it to <out>/channel.yaml",
    )
    .option(
      "--version <version>",
      "the release version, for example 2026.10.10-001 (with --from-image: else the image's label)",
    )
    .requiredOption("--out <dir>", "the channel directory")
    .option(
      "-a, --artifact <name=file[@offset]>",
      "an artifact and its byte offset in the slot (repeatable)",
      parseArtifact,
    )
    .option(
      "--from-image <ref>",
      "an OCI image (a layout directory, oci:DIR[:name] or oci-archive:FILE[:name]): its root " +
        "filesystem, kernel and initrd become the release (docs/releases.md)",
    )
    .option("--slot-size <size>", "with --from-image: the slot partitions' size", parseSize)
    .option("--fs <ext4|erofs>", "with --from-image: the slot's filesystem", "ext4")
    .option("--kernel-version <version>", "with --from-image: the kernel, when the image has more")
    .option(
      "--platform <os/arch[/variant]>",
      "with --from-image: the machines' platform, for example linux/arm64 (default: this host's); the image's config must name it",
    )
    .option("--notes <text>", "with --from-image: notes.txt (else the image's label)")
    .option(
      "--fs-uuid <uuid>",
      "with --from-image: the root filesystem's UUID (default: the same for every release, so ext4's checksums stay)",
    )
    .option(
      "--chunk-size <size>",
      "per-chunk digest size for large artifacts",
      parseSize,
      4 * 1024 * 1024,
    )
    .option(
      "--revert-floor <version>",
      "the oldest release a fleet-wide revert of this one may go back to (release.yaml revertFloor)",
    )
    .option("--no-index", "publish no chunk index: machines download every artifact whole")
    .option(
      "--no-pack",
      "publish no zstd pack and index pages: chunks travel plain and the whole index is fetched",
    )
    .action(
      async (o: {
        version?: string;
        out: string;
        artifact?: ArtifactInput[];
        fromImage?: string;
        slotSize?: number;
        fs: string;
        kernelVersion?: string;
        platform?: string;
        notes?: string;
        fsUuid?: string;
        chunkSize: number;
        revertFloor?: string;
        index: boolean;
        pack: boolean;
      }) => {
        const warn = (m: string): void => void process.stderr.write(`warning: ${m}\n`);
        if ((o.fromImage === undefined) === (o.artifact === undefined)) {
          throw new ReleaseError(
            "LIKEN_RELEASE_NO_SOURCE",
            "give the release's content: -a NAME=FILE (repeatable) or --from-image REF, not both",
          );
        }
        if (o.fromImage !== undefined) {
          if (o.slotSize === undefined) {
            throw new ReleaseError(
              "LIKEN_RELEASE_NO_SLOT_SIZE",
              "--from-image needs --slot-size: the size of the machines' slot partitions (for example 4G)",
            );
          }
          if (o.fs !== "ext4" && o.fs !== "erofs") {
            throw new ReleaseError("LIKEN_RELEASE_BAD_FS", `--fs ${o.fs}: use ext4 or erofs`);
          }
          const r = await buildReleaseFromImage({
            ref: o.fromImage,
            out: o.out,
            slotSizeBytes: o.slotSize,
            fs: o.fs,
            chunkSize: o.chunkSize,
            index: o.index,
            warn,
            ...(o.version === undefined ? {} : { version: o.version }),
            ...(o.kernelVersion === undefined ? {} : { kernelVersion: o.kernelVersion }),
            ...(o.platform === undefined ? {} : { platform: o.platform }),
            ...(o.fsUuid === undefined ? {} : { uuid: o.fsUuid }),
            ...(o.notes === undefined ? {} : { notes: o.notes }),
            ...(o.revertFloor === undefined ? {} : { revertFloor: o.revertFloor }),
          });
          process.stdout.write(
            `${r.dir}/release.yaml\n${catalogEntry(r.version, r.digest)}${sizesLine(r.version, r.sizes)}`,
          );
          return;
        }
        if (o.version === undefined) {
          throw new ReleaseError("LIKEN_RELEASE_BAD_VERSION", "give the release's --version");
        }
        const r = await buildRelease({
          version: o.version,
          out: o.out,
          artifacts: o.artifact!,
          chunkSize: o.chunkSize,
          ...(o.revertFloor === undefined ? {} : { revertFloor: o.revertFloor }),
          index: o.index,
          pack: o.pack,
          warn,
        });
        process.stdout.write(
          `${r.dir}/release.yaml\n${catalogEntry(o.version, r.digest)}${sizesLine(o.version, r.sizes)}`,
        );
      },
    );

  release
    .command("digest <url-or-file>")
    .description("Print the catalog digest (sha256:...) of a release.yaml")
    .action(async (where: string) => {
      process.stdout.write(`${digestOf(await readDocument(where))}\n`);
    });

  release
    .command("catalog-entry")
    .description(
      "Print the spec.releases.catalog entry for a published release (fetched and checked)",
    )
    .argument("<source>", "the channel's URL (what spec.releases.source holds)", parseSource)
    .argument("<version>", "the release version")
    .action(async (source: string, version: string) => {
      const bytes = await readDocument(new URL("release.yaml", releaseBase(source, version)).href);
      const r = parseRelease(bytes);
      if (r.version !== version) {
        throw new ReleaseError(
          "LIKEN_RELEASE_VERSION_MISMATCH",
          `${source}/${version}/release.yaml declares version ${r.version}`,
        );
      }
      process.stdout.write(catalogEntry(version, digestOf(bytes)));
    });

  registerReleaseChannel(release);
}
