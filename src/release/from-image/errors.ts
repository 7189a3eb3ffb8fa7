// The family of errors a release built from a container image is refused with. Each names the
// blob, layer entry or path that is wrong and what to do (docs/releases.md, "A release from a
// container image").
import { LikenError } from "../../errors.js";

export class ImageError extends LikenError {}

/** Stable codes, documented in docs/releases.md. */
export type ImageErrorCode =
  | "LIKEN_IMAGE_REF"
  | "LIKEN_IMAGE_LAYOUT"
  | "LIKEN_IMAGE_MEDIA_TYPE"
  | "LIKEN_IMAGE_DIGEST"
  | "LIKEN_IMAGE_MANIFEST_CHOICE"
  | "LIKEN_IMAGE_LAYER_ESCAPES"
  | "LIKEN_IMAGE_LAYER_DEVICE"
  | "LIKEN_IMAGE_LAYER_ENTRY"
  | "LIKEN_IMAGE_WHITEOUT_MISSING"
  | "LIKEN_IMAGE_COMPRESSION"
  | "LIKEN_IMAGE_NO_KERNEL"
  | "LIKEN_IMAGE_KERNEL_AMBIGUOUS"
  | "LIKEN_IMAGE_TOO_LARGE"
  | "LIKEN_IMAGE_MKFS"
  | "LIKEN_IMAGE_BUILD";

export function imageError(
  code: ImageErrorCode,
  message: string,
  context: Record<string, unknown> = {},
  cause?: unknown,
): ImageError {
  return new ImageError(code, message, { context, ...(cause === undefined ? {} : { cause }) });
}
