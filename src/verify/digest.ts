// Digests as liken writes them: "sha256:" and 64 lowercase hex digits.
import { createHash } from "node:crypto";

export const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
export const HEX_RE = /^[0-9a-f]{64}$/;

export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

export function digestOf(bytes: Uint8Array): string {
  return `sha256:${sha256Hex(bytes)}`;
}

/** "sha256:<hex>" -> "<hex>" (the format is checked by the document parsers). */
export function hexOf(digest: string): string {
  return digest.slice("sha256:".length);
}
