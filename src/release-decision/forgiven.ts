// What a person forgave, pure: the release decision's input from `liken rollout unrevoke` and
// `liken rollout resume --failed-release`. A failure of a release that a person forgave is
// not counted again, by the automatic revert as by the failure brake: otherwise the failures
// counted before an unrevoke trip the threshold again in the same pass, and the unrevoke is
// undone at once.
//   unrevoke R at T            every failure of R recorded at or before T;
//   resume --failed-release R  the failures of R of the machines it names, recorded at or
//                              before it (a machine that fails R again counts again).
import { sameRelease, type Cluster, type ReleaseRef } from "../api/types.js";

export interface Failure {
  machine: string;
  at: string;
}

const atOrBefore = (a: string, b: string): boolean => Date.parse(a) <= Date.parse(b);

/** Whether a person forgave `f`, a failure of `r`. */
export function forgiven(c: Cluster, r: ReleaseRef, f: Failure): boolean {
  const rollout = c.spec.rollout;
  const u = rollout?.unrevoke;
  if (u !== undefined && sameRelease(u, r) && atOrBefore(f.at, u.at)) return true;
  const resume = rollout?.failedReleaseResume;
  return (
    resume !== undefined &&
    sameRelease(resume, r) &&
    resume.machines.includes(f.machine) &&
    atOrBefore(f.at, resume.at)
  );
}
