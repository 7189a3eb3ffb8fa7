// cluster-operator's CSR approver: reads the cluster's CertificateSigningRequests, asks
// ./decide.ts about each pending one of liken's, writes the approval or the denial it decided,
// and records an Event for every request it did not approve. Only the leading copy acts
// (both copies would otherwise race on one approval; the API server refuses the second write
// with a 409, so even that race could never issue twice).
import {
  CertificatesV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1CertificateSigningRequest,
} from "@kubernetes/client-node";
import { X509Certificate } from "node:crypto";
import { ANNOTATION_REJOIN, isNotFound, LikenApi } from "../../api/index.js";
import { EVENT_NAMESPACE } from "../events.js";
import type { Logger } from "../logger.js";
import {
  decideCsr,
  requestedMachine,
  type CsrDecision,
  type CsrState,
  type CsrView,
  type Target,
} from "./decide.js";
import { readRejoinProof } from "../../api/rejoin-proof.js";
import { readRequest, requestSpki } from "./request.js";

/**
 * How often the requests are read again. A machine waits at most this long for its identity
 * once it is approvable; a list of a few hundred CSRs every 2 s is a small load (the kubelet's
 * own approver in kube-controller-manager reacts to a watch, within a second).
 */
export const APPROVER_INTERVAL_MS = 2_000;

export interface ApproverOptions {
  /** Off: approve nothing; denials and Events still happen (`--csr-approval off`). */
  autoApprove: boolean;
  /**
   * `key` or `key=value` (`--csr-node-label`): a Node carrying it is a machine of the fleet
   * and may join by its name with the bootstrap credential; otherwise only a Machine created
   * ahead may (./decide.ts).
   */
  nodeLabel?: string;
  /** Whether this copy leads (the operator's Lease); only the leader writes. */
  leading: () => boolean;
  identity: string;
  log: Logger;
  intervalMs?: number;
  now?: () => number;
}

const COMPONENT = "cluster-operator";

/** A CSR object as the approver judges it. */
function stateOf(csr: V1CertificateSigningRequest): CsrState {
  const conditions = csr.status?.conditions ?? [];
  const has = (t: string): boolean => conditions.some((c) => c.type === t && c.status === "True");
  // Denied and Failed are final whatever else the list says; Approved waits for the signer.
  return (["Denied", "Failed", "Approved"] as const).find(has) ?? "Pending";
}

/** The notAfter of an issued certificate (status.certificate, base64 PEM). */
function notAfterOf(cert: string | undefined): number | undefined {
  if (cert === undefined || cert === "") return undefined;
  try {
    // validTo reads "Dec  4 08:14:39 2027 GMT", which Date.parse takes.
    return Date.parse(new X509Certificate(Buffer.from(cert, "base64")).validTo);
  } catch {
    return undefined;
  }
}

/** The rejoin proof a pending request carries, checked against its own key (decide.ts). */
function rejoinOf(
  csr: V1CertificateSigningRequest,
  request: CsrView["request"],
): Pick<CsrView, "rejoin"> {
  const annotations = csr.metadata?.annotations;
  if (annotations === undefined || "unreadable" in request) return {};
  const machine = requestedMachine({ request } as CsrView);
  const spki = requestSpki(csr.spec.request);
  if (machine === undefined || spki === undefined) return {};
  const rejoin = readRejoinProof(annotations, machine, spki);
  return rejoin === undefined ? {} : { rejoin };
}

export function viewOf(csr: V1CertificateSigningRequest): CsrView {
  const issuedNotAfterMs = notAfterOf(csr.status?.certificate);
  const state = stateOf(csr);
  const request = readRequest(csr.spec.request);
  return {
    name: csr.metadata?.name ?? "",
    createdMs: csr.metadata?.creationTimestamp?.getTime() ?? 0,
    signerName: csr.spec.signerName,
    usages: csr.spec.usages ?? [],
    username: csr.spec.username ?? "",
    groups: csr.spec.groups ?? [],
    state,
    ...(issuedNotAfterMs === undefined ? {} : { issuedNotAfterMs }),
    request,
    ...(state === "Pending" ? rejoinOf(csr, request) : {}),
  };
}

export class CsrApprover {
  private readonly certs: CertificatesV1Api;
  private readonly core: CoreV1Api;
  private readonly liken: LikenApi;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  /** Requests already said in an Event, with the reason said: each is said once. */
  private readonly said = new Map<string, string>();
  /** Decisions written (approvals and denials), for tests and the stop log. */
  readonly written = { approved: 0, denied: 0 };

  constructor(
    kc: KubeConfig,
    private readonly opts: ApproverOptions,
  ) {
    this.certs = kc.makeApiClient(CertificatesV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.liken = new LikenApi(kc, COMPONENT);
  }

  start(): void {
    const every = this.opts.intervalMs ?? APPROVER_INTERVAL_MS;
    const turn = (): void => {
      this.running = this.round()
        .catch((e: unknown) =>
          this.opts.log.warn(
            { err: String(e) },
            "reading certificate requests failed; liken retries",
          ),
        )
        .finally(() => {
          if (this.timer !== undefined) this.timer = setTimeout(turn, every);
        });
    };
    this.timer = setTimeout(turn, 0);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One look at every request; exported for tests through start(). */
  private async round(): Promise<void> {
    if (!this.opts.leading()) return;
    const list = await this.certs.listCertificateSigningRequest();
    const all = list.items.map(viewOf);
    const live = new Set(all.map((c) => c.name));
    for (const name of this.said.keys()) if (!live.has(name)) this.said.delete(name);
    for (const [i, view] of all.entries()) {
      if (view.state !== "Pending") continue;
      // One request's failure (a 409 after a person's decision, a 403, a lookup that timed
      // out) never holds up the others: it is logged and judged again next round.
      await this.judge(list.items[i]!, view, all).catch((e: unknown) =>
        this.opts.log.warn(
          { csr: view.name, err: String(e).slice(0, 512) },
          "deciding on a certificate request failed; liken retries",
        ),
      );
    }
  }

  private async judge(
    csr: V1CertificateSigningRequest,
    view: CsrView,
    all: readonly CsrView[],
  ): Promise<void> {
    const machine = requestedMachine(view);
    const target = machine === undefined ? NO_TARGET : await this.target(machine);
    const nowMs = this.opts.now?.() ?? Date.now();
    const { autoApprove, nodeLabel } = this.opts;
    await this.act(
      csr,
      decideCsr(view, {
        nowMs,
        target,
        all,
        autoApprove,
        ...(nodeLabel === undefined ? {} : { nodeLabel }),
      }),
    );
  }

  private async target(machine: string): Promise<Target> {
    const [node, m] = await Promise.all([
      this.core.readNode({ name: machine }).then(
        (n) => n.metadata?.labels ?? {},
        (e: unknown) => {
          if (isNotFound(e) || (e as { code?: number }).code === 404) return undefined;
          throw e;
        },
      ),
      this.liken.machines.find(machine),
    ]);
    const expiry = m?.status?.certificateExpiry;
    const key = m?.status?.certificateKeyDigest;
    const marker = m?.metadata?.annotations?.[ANNOTATION_REJOIN];
    return {
      node: node !== undefined,
      nodeLabelled: node !== undefined && carries(node, this.opts.nodeLabel),
      machine: m !== undefined,
      ...(expiry === undefined ? {} : { certificateExpiryMs: Date.parse(expiry) }),
      ...(key === undefined ? {} : { certificateKeyDigest: key }),
      ...(marker === undefined ? {} : { rejoinMarker: marker }),
    };
  }

  private async act(csr: V1CertificateSigningRequest, d: CsrDecision): Promise<void> {
    const name = csr.metadata?.name ?? "";
    switch (d.kind) {
      case "ignore":
        return;
      case "approve":
      case "deny": {
        const approve = d.kind === "approve";
        const reason = approve ? "LikenMachineApproved" : d.reason;
        const now = new Date();
        const body: V1CertificateSigningRequest = {
          ...csr,
          status: {
            ...csr.status,
            conditions: [
              ...(csr.status?.conditions ?? []),
              {
                type: approve ? "Approved" : "Denied",
                status: "True",
                reason,
                message: d.message.slice(0, 1024),
                lastUpdateTime: now,
                lastTransitionTime: now,
              },
            ],
          },
        };
        // Conditioned on the request's resourceVersion: a request changed meanwhile (a
        // person's decision) meets a 409 and is judged again next round.
        await this.certs.replaceCertificateSigningRequestApproval({ name, body });
        if (approve) this.written.approved++;
        else this.written.denied++;
        this.opts.log.info(
          { csr: name, decision: d.kind, reason, message: d.message },
          "certificate request",
        );
        if (!approve)
          this.event(csr, "Warning", `CertificateRequest${d.reason}`, `denied: ${d.message}`);
        else if (d.rejoined === true)
          this.event(csr, "Normal", "CertificateRequestRejoined", `approved: ${d.message}`);
        return;
      }
      case "leave":
        if (this.said.get(name) === d.reason) return;
        this.said.set(name, d.reason);
        this.opts.log.info(
          { csr: name, decision: "leave", reason: d.reason, message: d.message },
          "certificate request",
        );
        this.event(
          csr,
          "Warning",
          `CertificateRequest${d.reason}`,
          `left for a person: ${d.message}`,
        );
        return;
      default: {
        const never: never = d;
        throw new Error(`unknown decision ${JSON.stringify(never)}`);
      }
    }
  }

  /** Best effort, as every Event of the operator: a failed Event never blocks a decision. */
  private event(
    csr: V1CertificateSigningRequest,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ): void {
    const now = new Date();
    const name = csr.metadata?.name ?? "";
    this.core
      .createNamespacedEvent({
        namespace: EVENT_NAMESPACE,
        body: {
          metadata: { generateName: `${name.slice(0, 200)}.` },
          involvedObject: {
            apiVersion: "certificates.k8s.io/v1",
            kind: "CertificateSigningRequest",
            name,
            ...(csr.metadata?.uid === undefined ? {} : { uid: csr.metadata.uid }),
          },
          type,
          reason,
          message: message.slice(0, 1024),
          source: { component: COMPONENT },
          reportingComponent: COMPONENT,
          reportingInstance: this.opts.identity.slice(0, 128),
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      })
      .catch((e: unknown) => this.opts.log.warn({ err: String(e) }, "an Event failed"));
  }
}

const NO_TARGET: Target = { node: false, nodeLabelled: false, machine: false };

/** Whether `labels` carry `selector` (`key`: present; `key=value`: that value). */
export function carries(labels: Record<string, string>, selector: string | undefined): boolean {
  if (selector === undefined) return false;
  const at = selector.indexOf("=");
  if (at < 0) return Object.hasOwn(labels, selector);
  return labels[selector.slice(0, at)] === selector.slice(at + 1);
}
