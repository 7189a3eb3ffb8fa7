// Whether cluster-operator approves a machine's CertificateSigningRequest: a pure decision over
// what the request says and what the cluster holds (docs/operator.md, "Machine certificates").
// A request is approved only when it is exactly what a liken agent files for itself; whatever
// could be a mistake or an attack is denied (nothing can be issued) or left for a person, and
// said in an Event either way. Wiring: ./approver.ts.
import { type CsrDecision, type CsrView, type CsrWorld, requestedMachine } from "./csr-facts.js";
import {
  AGAIN,
  PERSON,
  clusterRefusal,
  howItJoins,
  isLikens,
  requesterOf,
  shapeRefusal,
} from "./refusals.js";

// What a request and the cluster say, as the approver and the tests name it.
export * from "./csr-facts.js";

/** The approver's verdict on one request. */
export function decideCsr(csr: CsrView, w: CsrWorld): CsrDecision {
  if (csr.state !== "Pending" || !isLikens(csr)) return { kind: "ignore" };
  if ("unreadable" in csr.request) {
    return {
      kind: "deny",
      reason: "Unreadable",
      message: `the request cannot be read (${csr.request.unreadable}); ${AGAIN}`,
    };
  }
  const machine = requestedMachine(csr);
  const shape = shapeRefusal(csr, csr.request, machine);
  if (shape !== undefined || machine === undefined) return shape ?? { kind: "ignore" };
  const requester = requesterOf(csr, machine);
  if ("reason" in requester) return requester;
  const refusal = clusterRefusal(csr, machine, requester, w);
  if (refusal !== undefined) return refusal;
  const { by, rejoined } = howItJoins(csr, machine, requester, w);
  if (!w.autoApprove) {
    return {
      kind: "leave",
      reason: "AutoApprovalOff",
      message: `machine ${machine} ${by}; automatic approval is off: ${PERSON}`,
    };
  }
  return {
    kind: "approve",
    machine,
    message: `machine ${machine} ${by}`,
    ...(rejoined ? { rejoined } : {}),
  };
}
