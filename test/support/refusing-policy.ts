// A ValidatingAdmissionPolicy (and its binding) that makes the real API server refuse some
// writes, for the tests that need a refusal the way a tighter CRD, a broken RBAC rule or a
// webhook would give one. Each test names what it refuses; the manifest and its removal live
// here once.
import { kubectl } from "./kube.js";

export interface RefusingPolicy {
  /** The policy's and its binding's name (unique per test). */
  name: string;
  /** The API group, resources and operations the policy looks at. */
  apiGroup: string;
  resources: string[];
  operations: ("CREATE" | "UPDATE")[];
  /** A CEL match condition (only writes it holds for are judged), or none: every write. */
  match?: string;
  /** The CEL expression a write must satisfy, and the message of a refusal. */
  allow: string;
  message: string;
  /** The status reason of a refusal: Invalid answers 422 (the default answers 403). */
  reason?: "Invalid";
}

function manifest(p: RefusingPolicy): string {
  const match =
    p.match === undefined
      ? ""
      : `  matchConditions:\n    - name: this-object\n      expression: ${JSON.stringify(p.match)}\n`;
  return `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ${p.name}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [${p.apiGroup}]
        apiVersions: ["*"]
        operations: [${p.operations.join(", ")}]
        resources: [${p.resources.join(", ")}]
${match}  validations:
    - expression: ${JSON.stringify(p.allow)}
      message: ${JSON.stringify(p.message)}
${p.reason === undefined ? "" : `      reason: ${p.reason}\n`}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ${p.name}}
spec:
  policyName: ${p.name}
  validationActions: [Deny]
`;
}

/**
 * Applies the policy; the API server enforces it once it has compiled it (the caller waits for
 * a refusal it can see). Returns its removal, which is safe to call twice.
 */
export async function applyRefusingPolicy(p: RefusingPolicy): Promise<() => Promise<void>> {
  const applied = await kubectl(["apply", "-f", "-"], { input: manifest(p) });
  if (applied.code !== 0) {
    throw new Error(`the test policy ${p.name} was not applied: ${applied.stderr}`);
  }
  return async () => {
    await kubectl([
      "delete",
      "validatingadmissionpolicybinding,validatingadmissionpolicy",
      p.name,
      "--ignore-not-found",
    ]);
  };
}
