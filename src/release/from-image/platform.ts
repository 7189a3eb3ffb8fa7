// Which image of a multi-platform index a release is built from: the platform asked for
// (`os/architecture[/variant]`, as buildah, podman and docker spell it: linux/arm64,
// linux/arm/v7), else this machine's. The index's descriptors only say which platform each
// image is for; the image's config says what it is, and a config for another platform than
// the one asked for is refused rather than built into a release its machines cannot boot.
import { imageError } from "./errors.js";

export interface Platform {
  os: string;
  architecture: string;
  variant?: string | undefined;
}

/** Node's process.arch in the OCI image spec's words (Go's GOARCH). */
const GOARCH: Record<string, string> = {
  x64: "amd64",
  arm64: "arm64",
  arm: "arm",
  riscv64: "riscv64",
};

export function hostPlatform(): Platform {
  return { os: "linux", architecture: GOARCH[process.arch] ?? process.arch };
}

export const platformName = (p: Platform): string =>
  `${p.os}/${p.architecture}${p.variant === undefined ? "" : `/${p.variant}`}`;

/** `os/architecture[/variant]`; refuses anything else, saying how to spell it. */
export function parsePlatform(s: string): Platform {
  const m = /^([a-z0-9_]+)\/([a-z0-9_]+)(?:\/([a-z0-9_]+))?$/.exec(s);
  if (!m) {
    throw imageError(
      "LIKEN_IMAGE_REF",
      `platform "${s}" is not os/architecture[/variant]: give one as the image index names it, for example linux/arm64 or linux/arm/v7`,
      { platform: s },
    );
  }
  return { os: m[1]!, architecture: m[2]!, ...(m[3] === undefined ? {} : { variant: m[3] }) };
}

/** Whether `have` (a descriptor's or a config's) is `want`; a variant only when both say one. */
export function isPlatform(have: Partial<Platform> | undefined, want: Platform): boolean {
  if (have?.architecture !== want.architecture) return false;
  if (have.os !== undefined && have.os !== want.os) return false;
  return have.variant === undefined || want.variant === undefined || have.variant === want.variant;
}

/** Refuses an image config that is not for `want`, naming both. */
export function checkConfigPlatform(
  config: Partial<Platform>,
  want: Platform,
  configDigest: string,
): void {
  if (isPlatform(config, want)) return;
  const is = `${config.os ?? "?"}/${config.architecture ?? "?"}${config.variant === undefined ? "" : `/${config.variant}`}`;
  throw imageError(
    "LIKEN_IMAGE_MANIFEST_CHOICE",
    `image config ${configDigest} is for ${is}, not the ${platformName(want)} asked for: the image index names it for another platform than it is; ` +
      `build the image for ${platformName(want)} (buildah build --platform ${platformName(want)}), or ask for the platform it is for`,
    { config: configDigest, is, want: platformName(want) },
  );
}
