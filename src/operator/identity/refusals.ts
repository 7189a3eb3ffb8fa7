// Why a certificate request is refused, or left for a person, rule by rule (decide.ts composes
// them): its shape and key, who asks, what the cluster expects of the machine, a rejoin's proof.
import {
  AGENT_GROUP,
  AGENT_USER_PREFIX,
  ANNOTATION_REJOIN,
  BOOTSTRAP_GROUP,
  MACHINE_CSR_USAGES,
  MACHINE_SIGNER,
  REJOIN_MANUAL,
} from "../../api/types.js";
import {
  ACCEPTED_CURVES,
  type CsrDecision,
  type CsrRefusal,
  type CsrView,
  type CsrWorld,
  FLOOD_MAX,
  FLOOD_WINDOW_MS,
  type KeyFacts,
  MIN_RSA_BITS,
  REJOIN_PROOF_SKEW_MS,
  type RequestFacts,
  requestedMachine,
} from "./csr-facts.js";

/** Whether a request is liken's business at all: its subject or its requester is a machine's. */
export function isLikens(csr: CsrView): boolean {
  if (csr.username.startsWith(AGENT_USER_PREFIX) || csr.groups.includes(BOOTSTRAP_GROUP)) {
    return true;
  }
  if ("unreadable" in csr.request) return false;
  const { commonName, organizations } = csr.request;
  return commonName?.startsWith(AGENT_USER_PREFIX) === true || organizations.includes(AGENT_GROUP);
}

export function keyProblem(key: KeyFacts): string | undefined {
  switch (key.kind) {
    case "rsa":
      return key.bits >= MIN_RSA_BITS
        ? undefined
        : `an RSA key of ${key.bits} bits (at least ${MIN_RSA_BITS})`;
    case "ec":
      return ACCEPTED_CURVES.has(key.curve)
        ? undefined
        : `an EC key on curve ${key.curve} (P-256, P-384 or P-521)`;
    case "ed25519":
      return undefined;
    case "other":
      return `a ${key.name} key (RSA ≥ ${MIN_RSA_BITS}, ECDSA P-256/P-384/P-521 or Ed25519)`;
    default: {
      const never: never = key;
      throw new Error(`unknown key ${JSON.stringify(never)}`);
    }
  }
}

export const AGAIN = "the agent files a new request by itself";
export const PERSON = "a person decides: kubectl certificate approve|deny";

/** The request's own shape: signer, subject, usages, key. Undefined when all are right. */
export function shapeRefusal(
  csr: CsrView,
  r: RequestFacts,
  machine: string | undefined,
): Exclude<CsrDecision, { kind: "ignore" | "approve" }> | undefined {
  const deny = (reason: CsrRefusal, what: string): CsrDecision & { kind: "deny" } => ({
    kind: "deny",
    reason,
    message: `${what}; liken issues only CN=${AGENT_USER_PREFIX}<name>, O=${AGENT_GROUP}, usages [${MACHINE_CSR_USAGES.join(", ")}] for ${MACHINE_SIGNER}; ${AGAIN}`,
  });
  if (csr.signerName !== MACHINE_SIGNER) {
    // cluster-operator may approve or deny for its one signer only (config/rbac).
    return {
      kind: "leave",
      reason: "WrongSigner",
      message: `asks signer ${csr.signerName}, not ${MACHINE_SIGNER}, for a machine's identity; ${PERSON}`,
    };
  }
  if (
    machine === undefined ||
    r.organizations.length !== 1 ||
    r.organizations[0] !== AGENT_GROUP ||
    r.otherSubject.length > 0 ||
    r.alternativeNames > 0
  ) {
    const subject = `CN=${r.commonName ?? "(none)"}, O=[${r.organizations.join(", ")}]${r.otherSubject.length > 0 ? `, also ${r.otherSubject.join(", ")}` : ""}${r.alternativeNames > 0 ? `, ${r.alternativeNames} alternative names` : ""}`;
    return deny("WrongSubject", `asks for ${subject}`);
  }
  const usages = [...csr.usages].sort();
  if (usages.join() !== [...MACHINE_CSR_USAGES].sort().join()) {
    return deny("WrongUsages", `asks for usages [${csr.usages.join(", ")}]`);
  }
  const weak = keyProblem(r.key);
  if (weak !== undefined) return deny("WeakKey", `carries ${weak}`);
  return undefined;
}

/** Who filed it: the bootstrap credential, or the machine's own current identity. */
export type Requester = { kind: "bootstrap" } | { kind: "itself" };

export function requesterOf(
  csr: CsrView,
  machine: string,
): Requester | Exclude<CsrDecision, { kind: "ignore" | "approve" }> {
  if (csr.username.startsWith(AGENT_USER_PREFIX)) {
    if (csr.username === `${AGENT_USER_PREFIX}${machine}` && csr.groups.includes(AGENT_GROUP)) {
      return { kind: "itself" };
    }
    return {
      kind: "deny",
      reason: "OtherMachine",
      message: `${csr.username} asks for the identity of machine ${machine}; a machine renews only its own`,
    };
  }
  if (csr.groups.includes(BOOTSTRAP_GROUP)) return { kind: "bootstrap" };
  return {
    kind: "leave",
    reason: "UnknownRequester",
    message: `filed by ${csr.username}, neither the bootstrap group ${BOOTSTRAP_GROUP} nor ${AGENT_USER_PREFIX}${machine}; ${PERSON}`,
  };
}

/** Requests for the same name from the same identity, oldest first (this one included). */
export function sameAsk(csr: CsrView, machine: string, all: readonly CsrView[]): CsrView[] {
  const key = (c: CsrView): string => `${c.createdMs.toString().padStart(16, "0")}/${c.name}`;
  const same = all.filter((c) => c.username === csr.username && requestedMachine(c) === machine);
  if (!same.some((c) => c.name === csr.name)) same.push(csr);
  return same.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/**
 * Whether the fleet expects this name. The bootstrap credential is in every machine image, so
 * whoever holds one can ask for any name; a name is a machine's only when a Machine was created
 * for it ahead, or its Node carries the label the operator names. Any other Node (a
 * control-plane node above all: the machine's rights to cordon and evict would apply to it) is
 * denied. A renewal comes from a machine liken already trusted: it needs its Node or its
 * Machine to still exist, or a person decides.
 */
export function expectedRefusal(
  machine: string,
  requester: Requester,
  w: CsrWorld,
): Exclude<CsrDecision, { kind: "ignore" | "approve" }> | undefined {
  const t = w.target;
  if (requester.kind === "itself") {
    if (t.node || t.machine) return undefined;
    return {
      kind: "leave",
      reason: "NoSuchMachine",
      message: `machine ${machine} renews, but no Node and no Machine is named ${machine}; ${PERSON}`,
    };
  }
  if (t.machine || (t.node && t.nodeLabelled)) return undefined;
  const fix = `create the Machine ${machine} ahead (docs/machine.md, "Identity") ${
    w.nodeLabel === undefined
      ? "or run the operator with --csr-node-label and label its Node"
      : `or label its Node ${w.nodeLabel}`
  }; the agent files a new request by itself`;
  if (!t.node) {
    return {
      kind: "deny",
      reason: "NoSuchMachine",
      message: `the bootstrap credential asks for ${machine}, but no Machine and no Node is named ${machine}: the fleet does not expect it; ${fix}`,
    };
  }
  return {
    kind: "deny",
    reason: "UnexpectedNode",
    message: `the bootstrap credential asks for ${machine}, a Node the fleet does not expect: no Machine ${machine} was created ahead and the Node does not carry ${w.nodeLabel ?? "a label the operator names"}; a machine's rights (cordon its Node, evict its pods) must not reach a node outside the fleet (a control-plane node); if it is a machine, ${fix}`,
  };
}

/** The cluster-side checks: the name is expected, no live identity for a bootstrap, no flood. */
export function clusterRefusal(
  csr: CsrView,
  machine: string,
  requester: Requester,
  w: CsrWorld,
): Exclude<CsrDecision, { kind: "ignore" | "approve" }> | undefined {
  const recent = sameAsk(csr, machine, w.all).filter(
    (c) => w.nowMs - c.createdMs <= FLOOD_WINDOW_MS,
  );
  const rank = recent.findIndex((c) => c.name === csr.name);
  if (rank >= FLOOD_MAX) {
    return {
      kind: "deny",
      reason: "RequestFlood",
      message: `${csr.username} filed ${recent.length} requests for ${machine} within ${FLOOD_WINDOW_MS / 1000} s (at most ${FLOOD_MAX}); this is number ${rank + 1}`,
    };
  }
  const refusal = expectedRefusal(machine, requester, w);
  if (refusal !== undefined) return refusal;
  if (requester.kind === "bootstrap") {
    const until = validUntil(csr, machine, w);
    const unproven =
      until === undefined ? markedRefusal(machine, w) : rejoinRefusal(csr, machine, until, w);
    if (unproven !== undefined) return unproven;
  }
  const pending = w.all.find(
    (c) => c.name !== csr.name && c.state === "Pending" && requestedMachine(c) === machine,
  );
  if (pending !== undefined) {
    return {
      kind: "leave",
      reason: "AlreadyPending",
      message: `request ${pending.name} for ${machine} is pending too; ${PERSON} (deny the one that is not the machine's)`,
    };
  }
  return undefined;
}

/**
 * Until when `machine` holds a valid certificate (RFC 3339), by its Machine's report or an
 * issued request; undefined when it holds none.
 */
export function validUntil(csr: CsrView, machine: string, w: CsrWorld): string | undefined {
  const live = w.all.find(
    (c) =>
      c.name !== csr.name &&
      requestedMachine(c) === machine &&
      c.issuedNotAfterMs !== undefined &&
      c.issuedNotAfterMs > w.nowMs,
  );
  const expiry = w.target.certificateExpiryMs;
  if (live === undefined && (expiry === undefined || expiry <= w.nowMs)) return undefined;
  return new Date(Math.max(expiry ?? 0, live?.issuedNotAfterMs ?? 0)).toISOString();
}

/**
 * A person marked the Machine (liken.sh/rejoin) before rotating the CA because its key leaked:
 * every request of the bootstrap credential for it is theirs, a valid rejoin proof included
 * (the leaked key signs one as well as the machine does), and a join while no certificate is
 * known valid (whoever held the machine's identity could have written its status).
 */
export function markedRefusal(
  machine: string,
  w: CsrWorld,
): Exclude<CsrDecision, { kind: "ignore" | "approve" }> | undefined {
  const marker = w.target.rejoinMarker;
  if (marker === undefined) return undefined;
  const value =
    marker === REJOIN_MANUAL
      ? ""
      : ` (value "${marker.slice(0, 64)}", not "${REJOIN_MANUAL}": any value is read as ${REJOIN_MANUAL})`;
  return {
    kind: "leave",
    reason: "RejoinLeftForPerson",
    message: `the bootstrap credential asks for ${machine}, whose Machine carries the annotation ${ANNOTATION_REJOIN}${value}: a person set it to take this machine's next identity by hand (its key may have leaked); check that this request is the machine's own (kubectl certificate approve|deny), then remove it: kubectl annotate machine ${machine} ${ANNOTATION_REJOIN}-`,
  };
}

/**
 * A bootstrap request for a name that holds a valid certificate: approved only when the
 * machine proves it is the same one (docs/adr/rejoin-after-ca-rotation.md). Its agent joins
 * again this way when the API server refuses that certificate (the client CA rotated); the
 * proof is a signature by the key of that certificate, the key its Machine last reported
 * (status.certificateKeyDigest), over the new request's key, its name and the signing time.
 * The bootstrap credential alone, in every machine image, never takes over a machine.
 */
export function rejoinRefusal(
  csr: CsrView,
  machine: string,
  until: string,
  w: CsrWorld,
): Exclude<CsrDecision, { kind: "ignore" | "approve" }> | undefined {
  const proof = csr.rejoin;
  if (proof === undefined) {
    return (
      markedRefusal(machine, w) ?? {
        kind: "leave",
        reason: "AlreadyJoined",
        message: `the bootstrap credential asks for ${machine}, which holds a certificate valid until ${until} and renews with it, and the request carries no proof by that certificate's key (an agent whose certificate the API server no longer accepts proves itself by it); a reinstalled machine needs a person: ${PERSON}`,
      }
    );
  }
  if ("invalid" in proof) {
    return {
      kind: "deny",
      reason: "RejoinProofInvalid",
      message: `the bootstrap credential asks for ${machine}, which holds a certificate valid until ${until}, with a proof that does not hold: ${proof.invalid}; only the key of that certificate can take the name back; ${AGAIN}`,
    };
  }
  const signed = new Date(proof.signedAtMs).toISOString();
  const created = new Date(csr.createdMs).toISOString();
  if (Math.abs(proof.signedAtMs - csr.createdMs) > REJOIN_PROOF_SKEW_MS) {
    return {
      kind: "deny",
      reason: "RejoinProofStale",
      message: `machine ${machine}'s rejoin proof was signed at ${signed}, but its request was created at ${created}, more than ${REJOIN_PROOF_SKEW_MS / 60_000} min apart: an old proof is not taken; if the machine's clock is wrong, fix it (chrony, timedatectl); ${AGAIN}`,
    };
  }
  // After the proof's own checks: a proof that does not hold is denied, marker or not.
  const marked = markedRefusal(machine, w);
  if (marked !== undefined) return marked;
  const reported = w.target.certificateKeyDigest;
  const expiry = w.target.certificateExpiryMs;
  if (reported === undefined || reported !== proof.keyDigest) {
    const why =
      reported === undefined
        ? `its Machine reports no status.certificateKeyDigest (an agent older than the field, or a person cleared it to shut that key out)`
        : `its Machine last reported key ${reported} (a certificate renewed just before the rotation and not yet reported, or a key that is not the machine's)`;
    return {
      kind: "leave",
      reason: "RejoinKeyUnknown",
      message: `the bootstrap credential asks for ${machine}, which holds a certificate valid until ${until}, with a proof by key ${proof.keyDigest}, but ${why}; ${PERSON}`,
    };
  }
  if (expiry === undefined || expiry <= w.nowMs) {
    return {
      kind: "leave",
      reason: "RejoinKeyUnknown",
      message: `machine ${machine} proves key ${proof.keyDigest}, but the certificate its Machine reports for that key expired at ${expiry === undefined ? "(no status.certificateExpiry)" : new Date(expiry).toISOString()}; ${PERSON}`,
    };
  }
  return undefined;
}

/**
 * What an approvable request does, for the message: a join, a renewal, or a rejoin proven by
 * the key of a certificate still valid (it passed rejoinRefusal to get here).
 */
export function howItJoins(
  csr: CsrView,
  machine: string,
  requester: Requester,
  w: CsrWorld,
): { by: string; rejoined: boolean } {
  if (requester.kind === "itself") return { by: "renews", rejoined: false };
  const proof = csr.rejoin;
  if (proof === undefined || "invalid" in proof || validUntil(csr, machine, w) === undefined) {
    return { by: "joins with the bootstrap credential", rejoined: false };
  }
  return {
    by: `joins again with the bootstrap credential, proving with the key ${proof.keyDigest} its Machine reports that it is the same machine (the API server no longer accepts its certificate: the client CA rotated)`,
    rejoined: true,
  };
}
