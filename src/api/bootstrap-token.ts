// The fleet's shared bootstrap credential: a Kubernetes bootstrap token
// (docs/adr/machine-bootstrap-token.md). The token `<id>.<secret>` lives in a Secret named
// bootstrap-token-<id> in kube-system; the API server (--enable-bootstrap-token-auth)
// authenticates it as system:bootstrap:<id> in system:bootstrappers plus the groups the Secret
// adds: liken's is system:bootstrappers:liken, which may only file and read certificate
// requests (config/rbac/bootstrap.yaml). Deleting the Secret revokes the token; the
// controller manager's tokencleaner deletes it at its expiration.
import { randomInt } from "node:crypto";
import { ApiError, API_ERROR_CODES } from "./errors.js";
import { BOOTSTRAP_GROUP } from "./types.js";

/** The format the API server accepts (k8s.io/cluster-bootstrap/token/api). */
export const BOOTSTRAP_TOKEN = /^([a-z0-9]{6})\.([a-z0-9]{16})$/;
const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

function random(n: number): string {
  return Array.from({ length: n }, () => ALPHABET[randomInt(ALPHABET.length)]).join("");
}

/** A new token, `<6 characters>.<16 characters>`, from the system's CSPRNG. */
export function newBootstrapToken(): string {
  return `${random(6)}.${random(16)}`;
}

/** The Secret that makes `token` valid, until `expires` when given. */
export function bootstrapTokenSecret(
  token: string,
  opts: { expires?: Date; description?: string } = {},
): {
  apiVersion: "v1";
  kind: "Secret";
  type: string;
  metadata: { name: string; namespace: string };
  stringData: Record<string, string>;
} {
  const m = BOOTSTRAP_TOKEN.exec(token);
  if (m === null) {
    throw new ApiError(
      API_ERROR_CODES.usage,
      "a bootstrap token is <6 of [a-z0-9]>.<16 of [a-z0-9]> (kubeadm token generate makes one)",
    );
  }
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "bootstrap.kubernetes.io/token",
    metadata: { name: `bootstrap-token-${m[1]}`, namespace: "kube-system" },
    stringData: {
      "token-id": m[1]!,
      "token-secret": m[2]!,
      "usage-bootstrap-authentication": "true",
      "auth-extra-groups": BOOTSTRAP_GROUP,
      description: opts.description ?? "liken machines join with this token",
      ...(opts.expires === undefined ? {} : { expiration: opts.expires.toISOString() }),
    },
  };
}
