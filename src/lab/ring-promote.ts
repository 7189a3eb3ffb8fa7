// How the rings scene runs `liken promote`: the real command, through a kubeconfig of
// read-only contexts, one per ring promoted from, each with the token of a ServiceAccount that
// may only read Clusters (docs/rings.md, "Read-only credentials"), as a person's would.
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { likenEntry } from "../cli/entry.js";
import type { ControlPlaneState } from "../controlplane/instance.js";
import type { Lab } from "./lab.js";
import { LAB_DIR } from "./paths.js";

const run = promisify(execFile);

/**
 * A ServiceAccount that may only read Clusters (docs/rings.md, "Read-only credentials"), and
 * its token: what `liken promote` reads a ring with.
 */
async function readerToken(lab: Lab, kubeconfig: string): Promise<string> {
  const kubectl = (args: string[], input?: string) =>
    new Promise<string>((resolve, reject) => {
      const child = execFile(
        path.join(lab.binDir, "kubectl"),
        args,
        { env: { ...process.env, KUBECONFIG: kubeconfig } },
        (e, stdout, stderr) =>
          e ? reject(new Error(`kubectl ${args.join(" ")}: ${stderr}`)) : resolve(stdout),
      );
      if (input !== undefined) child.stdin?.end(input);
    });
  await kubectl(
    ["apply", "-f", "-"],
    `apiVersion: v1
kind: ServiceAccount
metadata: {name: liken-promote-reader, namespace: liken-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: liken-promote-reader}
rules:
  - apiGroups: [liken.sh]
    resources: [clusters]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: liken-promote-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: liken-promote-reader}
subjects: [{kind: ServiceAccount, name: liken-promote-reader, namespace: liken-system}]
`,
  );
  return (
    await kubectl([
      "create",
      "token",
      "liken-promote-reader",
      "-n",
      "liken-system",
      "--duration=2h",
    ])
  ).trim();
}

/** One kubeconfig with a read-only context per ring that is promoted from (canary, early). */
export async function readerKubeconfig(
  lab: Lab,
  planes: Partial<Record<"canary" | "early", ControlPlaneState>>,
): Promise<string> {
  const kc = new KubeConfig();
  const clusters = [];
  const users = [];
  const contexts = [];
  for (const [ring, cp] of Object.entries(planes)) {
    clusters.push({ name: ring, server: cp.server, caFile: cp.certs.caCert });
    users.push({ name: `${ring}-reader`, token: await readerToken(lab, cp.kubeconfig) });
    contexts.push({ name: ring, cluster: ring, user: `${ring}-reader` });
  }
  kc.loadFromOptions({ clusters, users, contexts, currentContext: "canary" });
  const file = path.join(LAB_DIR, "lab", "rings.kubeconfig"); // rewritten as rings join
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/** `liken promote`, the real command; its output, and whether it signed. */
export async function promoteCli(args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const r = await run(process.execPath, [likenEntry(), "promote", ...args]);
    return { ok: true, out: `${r.stdout}${r.stderr}`.trim() };
  } catch (e) {
    const x = e as { stdout?: string; stderr?: string };
    return { ok: false, out: `${x.stdout ?? ""}${x.stderr ?? ""}`.trim() };
  }
}
