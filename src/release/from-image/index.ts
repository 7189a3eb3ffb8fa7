// A release's root filesystem from a container image: the modules `liken release build
// --from-image` and `liken machine image` share (docs/releases.md, "A release from a container
// image").
export {
  readOciLayout,
  parseImageRef,
  verifyBlob,
  MEDIA,
  type OciImage,
  type Descriptor,
} from "./oci.js";
export {
  unpackLayers,
  layersOf,
  entryPath,
  type LayerSource,
  type UnpackOptions,
} from "./unpack.js";
export { Tree, treeFromDirectory, type Meta, type Entry, type FileNode } from "./tree.js";
export {
  findBootArtifacts,
  kernelCandidates,
  linkGrubBootFiles,
  type BootArtifacts,
} from "./boot.js";
export { makeFilesystemImage, ext4Needs, type SlotFs, type FilesystemImageOptions } from "./fs.js";
export {
  buildReleaseFromImage,
  uuidFrom,
  ROOTFS_UUID,
  LABELS,
  type FromImageOptions,
  type FromImageResult,
} from "./from-image.js";
export { ImageError } from "./errors.js";
