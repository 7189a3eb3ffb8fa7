// What a Machine registered by its own agent says about itself (docs/agent.md, "Registration"):
// a pure decision over agent.yaml and the Node as read. Registration protects by default: a
// control-plane node's Machine is a Leader, so the one-leader-down rule covers it even when
// nobody edits the Machine. agent.yaml's role and rebootPolicy win over everything.
import type { PolicySource, RebootPolicy, Role, RoleSource } from "../api/types.js";

/** The labels kubeadm and others put on control-plane nodes (master: before Kubernetes 1.24). */
export const CONTROL_PLANE_LABELS = [
  "node-role.kubernetes.io/control-plane",
  "node-role.kubernetes.io/master",
] as const;

export interface RegistrationFacts {
  role?: Role;
  rebootPolicy?: RebootPolicy;
  /** The Node's labels; undefined when the Node could not be read (missing, or refused). */
  nodeLabels: Record<string, string> | undefined;
}

export interface RegistrationDecision {
  role: Role;
  roleFrom: RoleSource;
  rebootPolicy: RebootPolicy;
  rebootPolicyFrom: PolicySource;
}

export function registration(f: RegistrationFacts): RegistrationDecision {
  const policy =
    f.rebootPolicy !== undefined
      ? { rebootPolicy: f.rebootPolicy, rebootPolicyFrom: "AgentConfig" as const }
      : { rebootPolicy: "Manual" as const, rebootPolicyFrom: "Default" as const };
  if (f.role !== undefined) return { role: f.role, roleFrom: "AgentConfig", ...policy };
  if (f.nodeLabels === undefined) return { role: "Worker", roleFrom: "Default", ...policy };
  const leader = CONTROL_PLANE_LABELS.some((l) => l in f.nodeLabels!);
  return { role: leader ? "Leader" : "Worker", roleFrom: "NodeLabel", ...policy };
}

/**
 * How long an agent without `role` in agent.yaml waits for its Node before it registers its
 * Machine without it (Worker, roleFrom Default): the kubelet registers its Node within seconds
 * of its start, which is about when the agent starts; a minute covers a slow first boot. The
 * agent may not change its Machine's spec once created (the admission policy gives the spec to
 * people), so a role read too early could not be corrected later.
 */
export const NODE_WAIT_MS = 60_000;

/** Whether to register now: the Node is there to read, or it has been awaited long enough. */
export function mayRegister(nodeSeen: boolean, waitedMs: number): boolean {
  return nodeSeen || waitedMs >= NODE_WAIT_MS;
}
