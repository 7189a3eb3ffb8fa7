// What the Machine says when a download fails (issue 50, "The reason on the Machine"): the same
// text goes to the status (the last problem, status.ts) and to a DownloadFailed Event, and
// names what failed (the URL and the HTTP answer, or the check), what the slot holds now, what
// to do, and when the agent tries again. Pure: test/unit/download-notice.test.ts.
//
// The download runs in a child (download.ts); its last stderr line is the failure as the CLI
// prints it, `liken: <message> [<CODE>]` (src/cli/program.ts). Earlier lines are its log.
import { RANGE_IGNORED_NOTICE } from "../slots/seed-fallback.js";

/** A failed download, as the status and the Event say it. */
export interface DownloadNotice {
  /** The condition reason (CamelCase), also the Event's reason. */
  reason: "DownloadFailed" | "DownloadStalled";
  message: string;
}

/** The journal of the agent: where every line of the download is (docs/agent.md, "Logs"). */
export const AGENT_LOG_HINT =
  "the agent's log has every step: journalctl -u liken-agent on the machine, or its serial console";

const FAILURE_LINE = /^liken: (.*) \[([A-Z0-9_]+)\]$/;

/** The child's failure, from the tail of its stderr: the coded line if any, else the last. */
export function childFailure(tail: string): { text: string; code?: string } {
  const lines = tail
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = FAILURE_LINE.exec(lines[i]!);
    if (m) return { text: m[1]!, code: m[2]! };
  }
  const last = lines.at(-1);
  return { text: last === undefined ? "it said nothing" : last.replace(/^liken: /, "") };
}

/** What a person can do about a failure with this code (the message names the rest). */
export function whatToDo(code: string | undefined, text: string): string {
  if (code === undefined) return AGENT_LOG_HINT;
  switch (code) {
    case "LIKEN_VERIFY_HTTP_STATUS":
      return /HTTP 404/.test(text)
        ? "check that the Cluster's spec.releases.source is the channel's base URL and that the release is published there"
        : "check the channel server's own log; the agent tries again";
    case "LIKEN_VERIFY_CONNECTION":
    case "LIKEN_VERIFY_STALLED":
      return "check that the channel server is up and that this machine reaches it (a proxy, a firewall, its address from the machine); the agent resumes from the last durable byte";
    case "LIKEN_VERIFY_REDIRECT_REFUSED":
      return "serve the channel where the Cluster's spec.releases.source points, without a redirect to another host";
    case "LIKEN_VERIFY_DIGEST_MISMATCH":
    case "LIKEN_VERIFY_VERSION_MISMATCH":
      return "the channel holds another release.yaml than the catalog names: publish the release again under a new version, never edit a published one";
    case "LIKEN_VERIFY_SIZE_MISMATCH":
    case "LIKEN_VERIFY_BEYOND_SIZE":
    case "LIKEN_VERIFY_ARTIFACT_MISMATCH":
    case "LIKEN_NATIVE_CHUNK_MISMATCH":
      return "the server sends other bytes than release.yaml names: check that the files under the version directory are the ones `liken release build` wrote, and any proxy or cache between";
    case "LIKEN_SLOT_TOO_SMALL":
      return "build the release for this machine's slot size";
    default:
      return AGENT_LOG_HINT;
  }
}

/** "60 s", "2 min": the retry delay as a person reads it. */
export function humanDelay(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}

/**
 * The notice for a download child that ended with an error. `tail` is its stderr's end;
 * `retryInMs` when the agent tries again; `failures` how many attempts failed in a row.
 */
export function failedNotice(
  o: { version: string; slot: string; tail: string; exitCode: number | null },
  retry: { inMs: number; failures: number },
): DownloadNotice {
  const f = childFailure(o.tail);
  const code = f.code ? ` [${f.code}]` : o.exitCode === null ? " (killed by a signal)" : "";
  return {
    reason: "DownloadFailed",
    message:
      `download of ${o.version} into slot ${o.slot} failed: ${f.text}${code}; ` +
      `what to do: ${whatToDo(f.code, f.text)}; ${again(retry)}`,
  };
}

/** The notice for a download killed for making no progress (towards.ts, downloadMs). */
export function stalledNotice(
  o: { version: string; slot: string; tail: string; idleMs: number },
  retry: { inMs: number; failures: number },
): DownloadNotice {
  const f = childFailure(o.tail);
  return {
    reason: "DownloadStalled",
    message:
      `download of ${o.version} into slot ${o.slot} made no progress for ${humanDelay(o.idleMs)} and was stopped; ` +
      `its last line: ${f.text}; what to do: ${AGENT_LOG_HINT}; ${again(retry)}`,
  };
}

function again(r: { inMs: number; failures: number }): string {
  const times = r.failures > 1 ? ` (${r.failures} failures in a row)` : "";
  return `nothing is staged until every artifact verifies, the running slot is untouched; next attempt in ${humanDelay(r.inMs)}${times}`;
}

/** The channel ignores Range, as the child's log line says it; undefined for any other line. */
export function parseRangeIgnored(line: string): string | undefined {
  const prefix = `liken: ${RANGE_IGNORED_NOTICE}: `;
  return line.startsWith(prefix) ? line.slice(prefix.length) : undefined;
}

/** The RangeIgnored Event: the download goes on, whole; what would make it send only the change. */
export function rangeIgnoredMessage(version: string, said: string): string {
  return `download of ${version}: ${said}`;
}
