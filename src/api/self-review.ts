// Who the API server takes a client for: a SelfSubjectReview (authentication.k8s.io/v1) asks
// the authenticator itself, so the answer is the server's, not what the client believes its
// credential says. A credential the server refuses throws its refusal (a 401).
import type { Rest } from "./rest.js";

export async function authenticatedUser(rest: Rest): Promise<string | undefined> {
  const review = await rest.request<{ status?: { userInfo?: { username?: string } } }>(
    "POST",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
      op: { verb: "create", kind: "SelfSubjectReview" },
    },
  );
  return review.status?.userInfo?.username;
}
