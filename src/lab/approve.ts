// Placeholder until `liken approve-reboot` lands in the operator's CLI: approves the staged
// version of a Manual machine exactly as that command does (spec.approval bound to the version).
import type { LikenApi } from "../api/client.js";
import { LikenError } from "../errors.js";

export async function approveReboot(
  api: LikenApi,
  cluster: string,
  machine: string,
  by: string,
): Promise<void> {
  const m = await api.machines.get(machine);
  if (m.spec.cluster !== cluster) {
    throw new LikenError(
      "LIKEN_LAB_APPROVE",
      `machine ${machine} belongs to cluster ${m.spec.cluster}, not ${cluster}`,
    );
  }
  const staged = m.status?.staged;
  if (!staged)
    throw new LikenError("LIKEN_LAB_APPROVE", `machine ${machine} has nothing staged to approve`);
  await api.machines.patch(machine, {
    spec: {
      approval: {
        version: staged.version,
        digest: staged.digest,
        by,
        at: new Date().toISOString(),
      },
    },
  });
}
