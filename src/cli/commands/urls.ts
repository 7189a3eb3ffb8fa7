// URLs on the command line, checked when parsed, with the same sentences as the API's rules
// (src/api/source-url.ts). Light on purpose: the agent's lean entry imports it.
import { InvalidArgumentError } from "commander";
import { sourceProblem } from "../../api/source-url.js";

/** A release channel's base URL (what spec.releases.source holds). */
export function parseSource(v: string): string {
  const problem = sourceProblem(v);
  if (problem !== undefined) throw new InvalidArgumentError(`"${v}": ${problem}`);
  return v;
}
