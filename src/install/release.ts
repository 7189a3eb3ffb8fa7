// The release the installer puts into slot a, through the agent's own trust chain: release.yaml
// checked against the catalog digest (src/verify), each artifact streamed through the native
// slot writer at its offset (which checks every chunk's digest before it writes it, and refuses
// a byte beyond the declared size), then read back from the medium and hashed. Nothing here
// trusts a file's name: only the digests.
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { readback, SlotWriter } from "../native/writer.js";
import { writeArtifact } from "../slots/artifact.js";
import { digestOf, hexOf } from "../verify/digest.js";
import { fetchDocument } from "../verify/fetch.js";
import {
  artifactUrl,
  MAX_RELEASE_BYTES,
  parseRelease,
  releaseBase,
  verifyRelease,
  type Artifact,
  type Release,
} from "../verify/release.js";
import { InstallError } from "./errors.js";

/** Where the release comes from: a release directory as `liken release build` wrote it, or a channel. */
export type ReleaseSource =
  { dir: string; digest?: string } | { channel: string; version: string; digest: string };

export interface LoadedRelease {
  release: Release;
  /** release.yaml, byte for byte. */
  document: Buffer;
  /** Its SHA-256: the catalog digest. */
  digest: string;
  /** Each artifact's URL (file: for a directory). */
  url(a: Artifact): URL;
  /** A local file of the artifact, when the release is a directory. */
  file(a: Artifact): string | undefined;
}

export async function loadRelease(src: ReleaseSource): Promise<LoadedRelease> {
  if ("dir" in src) {
    const dir = path.resolve(src.dir);
    const base = pathToFileURL(`${dir}/`);
    let document: Buffer;
    try {
      document = await readFile(path.join(dir, "release.yaml"));
    } catch (cause) {
      throw new InstallError(
        "LIKEN_INSTALL_BAD_INPUT",
        `--release ${src.dir}: no release.yaml there (${(cause as Error).message}); name the directory \`liken release build\` wrote, <channel>/<version>`,
        { cause },
      );
    }
    if (document.length > MAX_RELEASE_BYTES) {
      throw new InstallError(
        "LIKEN_INSTALL_BAD_INPUT",
        `--release ${src.dir}: release.yaml is larger than a release document may be`,
      );
    }
    const digest = digestOf(document);
    // With a digest given (the catalog's), the directory must hold exactly that document.
    const release =
      src.digest === undefined
        ? parseRelease(document)
        : verifyRelease(document, { version: parseRelease(document).version, digest: src.digest });
    return {
      release,
      document,
      digest,
      url: (a) => artifactUrl(base, a),
      file: (a) => fileURLToPath(artifactUrl(base, a)),
    };
  }
  const base = releaseBase(src.channel, src.version);
  const document = await fetchDocument(new URL("release.yaml", base), MAX_RELEASE_BYTES);
  const release = verifyRelease(document, { version: src.version, digest: src.digest });
  return {
    release,
    document,
    digest: src.digest,
    url: (a) => artifactUrl(base, a),
    file: () => undefined,
  };
}

/** Bytes of the slot the release needs: the end of its last artifact. */
export function releaseBytes(r: Release): number {
  return Math.max(0, ...r.artifacts.map((a) => a.offset + a.size));
}

function open(disk: string, a: Artifact, at: number, direct: boolean): SlotWriter {
  return SlotWriter.open({
    path: disk,
    offset: at,
    size: a.size,
    direct,
    ...(a.chunks ? { chunkSize: a.chunks.size, chunkDigests: a.chunks.digests } : {}),
  });
}

/** Streams a local artifact file into the disk; its whole digest is checked at the end. */
async function writeLocal(
  disk: string,
  a: Artifact,
  file: string,
  at: number,
  direct: boolean,
): Promise<void> {
  const w = open(disk, a, at, direct);
  try {
    for await (const piece of createReadStream(file, { highWaterMark: 4 * 1024 * 1024 })) {
      const b = piece as Buffer;
      if (w.position + b.length > a.size) {
        throw new InstallError(
          "LIKEN_INSTALL_VERIFY_FAILED",
          `artifact ${a.name}: ${file} is larger than the ${a.size} bytes release.yaml declares; refused before writing past them`,
        );
      }
      await w.write(b);
    }
    if (w.position < a.size) {
      throw new InstallError(
        "LIKEN_INSTALL_VERIFY_FAILED",
        `artifact ${a.name}: ${file} holds ${w.position} bytes, release.yaml declares ${a.size}`,
      );
    }
    const { digest } = await w.finish();
    if (digest !== null && digest !== hexOf(a.digest)) {
      throw new InstallError(
        "LIKEN_INSTALL_VERIFY_FAILED",
        `artifact ${a.name}: ${file} has digest sha256:${digest}, release.yaml says ${a.digest}`,
      );
    }
  } catch (e) {
    w.abort();
    throw e;
  }
}

/**
 * Writes every artifact of the release into the slot partition that starts at byte
 * `slotOffset` of `disk`, then reads each back from the medium and compares its SHA-256.
 */
export async function writeSlot(
  disk: string,
  slotOffset: number,
  r: LoadedRelease,
  o: { direct: boolean; log?: (m: string) => void },
): Promise<void> {
  for (const a of r.release.artifacts) {
    const at = slotOffset + a.offset;
    const file = r.file(a);
    if (file !== undefined) await writeLocal(disk, a, file, at, o.direct);
    else
      await writeArtifact({
        url: r.url(a),
        artifact: { ...a, offset: at },
        device: disk,
        direct: o.direct,
        onCheckpoint: async () => {},
        ...(o.log === undefined ? {} : { log: o.log }),
      });
    o.log?.(`artifact ${a.name}: ${a.size} bytes written at ${at}`);
  }
  for (const a of r.release.artifacts) {
    const got = await readback(disk, {
      offset: slotOffset + a.offset,
      size: a.size,
      direct: o.direct,
    });
    if (got !== hexOf(a.digest)) {
      throw new InstallError(
        "LIKEN_INSTALL_VERIFY_FAILED",
        `slot a of ${disk}: artifact ${a.name} reads back as sha256:${got}, release ${r.release.version} says ${a.digest}; the disk does not hold what was written: try another disk`,
        { context: { artifact: a.name, got, want: a.digest } },
      );
    }
  }
}

/** The bytes of artifact `name` as the slot holds them (read from the disk just written). */
export async function artifactBytes(r: LoadedRelease, name: string): Promise<Buffer | undefined> {
  const a = r.release.artifacts.find((x) => x.name === name);
  if (a === undefined) return undefined;
  const f = r.file(a);
  const bytes = f !== undefined ? await readFile(f) : await fetchDocument(r.url(a), a.size);
  if (digestOf(bytes) !== a.digest) {
    throw new InstallError(
      "LIKEN_INSTALL_VERIFY_FAILED",
      `artifact ${a.name}: ${f ?? r.url(a).href} does not match ${a.digest} of release ${r.release.version}`,
    );
  }
  return bytes;
}
