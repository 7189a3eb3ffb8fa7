// Undo liken's cordon, and only liken's.
import type { KubeConfig } from "@kubernetes/client-node";
import { uncordonAction } from "./cordon.js";
import { DrainError } from "./errors.js";
import { DrainApi } from "./kube.js";

export type UncordonResult = "uncordoned" | "not-ours" | "not-cordoned";

const UNCORDON_ATTEMPTS = 5;

export function uncordonNode(kc: KubeConfig, node: string): Promise<UncordonResult> {
  return uncordonWith(new DrainApi(kc), node);
}

/** The same through an existing client (a drain that stops undoes its own cordon). */
export async function uncordonWith(api: DrainApi, node: string): Promise<UncordonResult> {
  for (let attempt = 1; attempt <= UNCORDON_ATTEMPTS; attempt++) {
    const obj = await api.getNode(node);
    if (obj === undefined) {
      throw new DrainError("LIKEN_DRAIN_NODE_NOT_FOUND", `node ${node} does not exist`, {
        context: { node },
      });
    }
    const action = uncordonAction(obj);
    switch (action.kind) {
      case "not-ours":
      case "not-cordoned":
        return action.kind;
      case "uncordon":
      case "forget":
        if ((await api.patchNode(node, action.patch)) !== "conflict") {
          return action.kind === "uncordon" ? "uncordoned" : "not-cordoned";
        }
        break;
      default: {
        const never: never = action;
        throw new Error(`unhandled uncordon action ${JSON.stringify(never)}`);
      }
    }
  }
  throw new DrainError(
    "LIKEN_DRAIN_API",
    `node ${node}: the Node changed under every one of ${UNCORDON_ATTEMPTS} uncordon attempts; try again`,
    { retryable: true, context: { node } },
  );
}
