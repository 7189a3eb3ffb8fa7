// Shared by the commands people run against a rollout (approve-reboot, rollout): the
// kubeconfig, and who the person is to the API server (recorded as `by`).
import { AuthenticationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../../api/index.js";

export { loadKubeConfig } from "../../api/index.js";

export function likenApi(kc: KubeConfig): LikenApi {
  return new LikenApi(kc, "liken-cli");
}

/**
 * The username the API server knows this person by (a SelfSubjectReview, which every
 * authenticated user may create), so `by` names the identity RBAC checked, not a string
 * the person typed. Falls back to the kubeconfig's user entry.
 */
export async function whoAmI(kc: KubeConfig): Promise<string> {
  try {
    const r = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
    });
    const name = r.status?.userInfo?.username;
    if (name) return name;
  } catch {
    // An old server without SelfSubjectReview: the kubeconfig is the next best answer.
  }
  return kc.getCurrentUser()?.name ?? "unknown";
}
