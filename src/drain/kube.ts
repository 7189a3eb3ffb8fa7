// Every call the drain makes to the API server, and nothing else: core objects only (Node,
// Pod, Eviction, Event, PodDisruptionBudget, ResourceClaim), straight through
// @kubernetes/client-node. Errors leave this file as DrainError or as an EvictionOutcome.
import {
  ApiException,
  CoreV1Api,
  PatchStrategy,
  PolicyV1Api,
  ResourceV1Api,
  setHeaderOptions,
  type CoreV1Event,
  type KubeConfig,
  type ResourceV1ResourceClaim,
  type V1Node,
  type V1Pod,
  type V1PodDisruptionBudget,
} from "@kubernetes/client-node";
import { hostname } from "node:os";
import type { NodePatch } from "./cordon.js";
import { DrainError } from "./errors.js";
import { statusMessage } from "./pdb.js";

/** Names liken's Events (`kubectl describe node` shows it under "From"). */
export const EVENT_COMPONENT = "liken-drain";

export type EvictionOutcome =
  | { kind: "accepted" }
  /** Not there any more, or replaced by a pod of the same name (the UID precondition). */
  | { kind: "gone" }
  /**
   * by "budget": 429, a budget allows no disruption now (500 with several budgets matching is
   * too). by "admission": an admission webhook did not answer or could not check (5xx), e.g.
   * liken's eviction check while cluster-operator is down; it fails closed, so wait and retry.
   */
  | { kind: "blocked"; by: "budget" | "admission"; status: number; message: string }
  | { kind: "conflict"; message: string }
  | { kind: "failed"; status: number; message: string; retryable: boolean };

/**
 * How the API server words a webhook that could not be called ("failed calling webhook",
 * with failurePolicy Fail) or that answered it could not decide ("admission webhook ...
 * denied the request" with a 5xx code).
 */
const ADMISSION_FAILURE = /failed calling webhook|admission webhook/i;

export class DrainApi {
  private readonly core: CoreV1Api;
  private readonly policy: PolicyV1Api;
  private readonly resource: ResourceV1Api;

  constructor(kc: KubeConfig) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.policy = kc.makeApiClient(PolicyV1Api);
    this.resource = kc.makeApiClient(ResourceV1Api);
  }

  async getNode(name: string): Promise<V1Node | undefined> {
    try {
      return await this.core.readNode({ name });
    } catch (e) {
      if (e instanceof ApiException && e.code === 404) return undefined;
      throw apiError(`read node ${name}`, e);
    }
  }

  /** A JSON merge patch; a stale resourceVersion in it makes it fail with 409 (returned). */
  async patchNode(name: string, patch: NodePatch): Promise<V1Node | "conflict"> {
    try {
      return await this.core.patchNode(
        { name, body: patch },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    } catch (e) {
      if (e instanceof ApiException && e.code === 409) return "conflict";
      throw apiError(`patch node ${name}`, e);
    }
  }

  async podsOnNode(node: string): Promise<V1Pod[]> {
    try {
      const list = await this.core.listPodForAllNamespaces({
        fieldSelector: `spec.nodeName=${node}`,
      });
      return list.items;
    } catch (e) {
      throw apiError(`list the pods on node ${node}`, e);
    }
  }

  /**
   * All ResourceClaims (resource.k8s.io/v1). A cluster that does not serve that API (404)
   * has no claims the drain could order around.
   */
  async claims(): Promise<ResourceV1ResourceClaim[]> {
    try {
      return (await this.resource.listResourceClaimForAllNamespaces({})).items;
    } catch (e) {
      if (e instanceof ApiException && e.code === 404) return [];
      throw apiError("list ResourceClaims", e);
    }
  }

  async budgets(namespace: string): Promise<V1PodDisruptionBudget[]> {
    try {
      return (await this.policy.listNamespacedPodDisruptionBudget({ namespace })).items;
    } catch (e) {
      throw apiError(`list the PodDisruptionBudgets in ${namespace}`, e);
    }
  }

  /** policy/v1 Eviction of exactly this pod (UID precondition), never a plain delete. */
  async evict(namespace: string, name: string, uid: string): Promise<EvictionOutcome> {
    try {
      await this.core.createNamespacedPodEviction({
        name,
        namespace,
        body: {
          apiVersion: "policy/v1",
          kind: "Eviction",
          metadata: { name, namespace },
          deleteOptions: { preconditions: { uid } },
        },
      });
      return { kind: "accepted" };
    } catch (e) {
      if (!(e instanceof ApiException)) {
        return { kind: "failed", status: 0, message: String(e), retryable: true };
      }
      const code = e.code;
      const message = statusMessage(e.body);
      if (code === 404) return { kind: "gone" };
      // 409 is the UID precondition (the pod was replaced by one of the same name) or a
      // write conflict inside the API server (e.g. on the budget's status): look again.
      if (code === 409) return { kind: "conflict", message };
      // 500 "too many PodDisruptionBudgets" is how the API server answers a pod matched by
      // two budgets; it stays until a person fixes the budgets, so report it like a 429.
      if (code === 429 || (code === 500 && /DisruptionBudget/i.test(message))) {
        return { kind: "blocked", by: "budget", status: code, message };
      }
      if (code >= 500 && ADMISSION_FAILURE.test(message)) {
        return { kind: "blocked", by: "admission", status: code, message };
      }
      return { kind: "failed", status: code, message, retryable: code >= 500 };
    }
  }

  /** A core/v1 Event on the Node, where `kubectl describe node` shows it. */
  async nodeEvent(
    node: V1Node,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ): Promise<void> {
    const now = new Date();
    const name = node.metadata?.name ?? "";
    const event: CoreV1Event = {
      metadata: { generateName: `${name}.liken-drain.`, namespace: "default" },
      involvedObject: {
        apiVersion: "v1",
        kind: "Node",
        name,
        uid: node.metadata?.uid ?? name,
      },
      type,
      reason,
      message: message.slice(0, 1024),
      source: { component: EVENT_COMPONENT, host: hostname() },
      reportingComponent: EVENT_COMPONENT,
      reportingInstance: hostname(),
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    try {
      await this.core.createNamespacedEvent({ namespace: "default", body: event });
    } catch (e) {
      throw apiError(`record event ${reason} on node ${name}`, e);
    }
  }
}

function apiError(what: string, e: unknown): DrainError {
  const status = e instanceof ApiException ? e.code : undefined;
  const detail = e instanceof ApiException ? statusMessage(e.body) : String(e);
  return new DrainError("LIKEN_DRAIN_API", `could not ${what}: ${detail}`, {
    retryable: status === undefined || status >= 500 || status === 429,
    context: { status },
    cause: e,
  });
}
