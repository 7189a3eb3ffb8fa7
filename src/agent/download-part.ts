// What the agent downloads: the download child's supervisor (download.ts) as the daemon wires
// it. A download starts with the peers the Cluster assigns this machine (peer-serving.ts); its
// end reaches the status (a failure as the last problem, a staged release clearing it) and wakes
// the loop; each peer the child dropped is a PeerDropped Event on the Machine and a metric; the
// bytes so far go into every status; the child is stopped when the agent stops. A failure of
// any kind (a refused release.yaml, a child that failed or made no progress) says why in the
// status and in a Warning Event, in the same words (download-notice.ts); a channel that
// ignores Range is a RangeIgnored Event, once per download.
import type { Logger } from "pino";
import type { ReleaseRef } from "../api/types.js";
import { errorText } from "../errors.js";
import type { PeerDrop } from "../slots/peer-sources.js";
import type { Actions } from "./act.js";
import type { AgentApi } from "./api.js";
import { DownloadSupervisor, type DownloadEnd } from "./download.js";
import {
  failedNotice,
  humanDelay,
  parseRangeIgnored,
  rangeIgnoredMessage,
  stalledNotice,
} from "./download-notice.js";
import type { AgentMeter } from "./meter.js";
import type { Observation } from "./observe.js";
import { peerDroppedMessage } from "./peer-dropped.js";
import { assignedPeers } from "./peer-serving.js";
import type { SidePart } from "./side-part.js";
import type { Problem, StatusExtras } from "./status.js";
import type { Action } from "./steps.js";
import type { ApiView } from "./view.js";

export interface DownloadWiring {
  /** The script that starts liken with process.execPath (for the download child). */
  entry: string;
  /** The Machine's name: the peers assigned to it. */
  machine: string;
  meter: AgentMeter;
  log: Logger;
  api: AgentApi;
  view: ApiView;
  /** The daemon's actions, which start and stop the child (act.ts). */
  actions: () => Actions;
  /** The last failure on the way to the target: a failed download's, or none once staged. */
  problem: (p: Problem | undefined) => void;
  /** Wakes the loop: the end of a download is looked at at once. */
  wake: () => void;
  /** The agent's downloadRetryMs: the first step of the retry's backoff (download.ts). */
  retryMs?: number;
}

export class DownloadPart implements SidePart {
  readonly supervisor: DownloadSupervisor;

  constructor(private readonly w: DownloadWiring) {
    this.supervisor = new DownloadSupervisor(
      w.entry,
      (end) => this.ended(end),
      w.meter,
      (release, d) => {
        w.meter.peerDropped(d);
        void this.peerDropped(release, d);
      },
      (release, line) => {
        // The child's own steps into the agent's log (journald, the console): its stderr goes
        // nowhere else, and a download that never ends must be readable on the machine.
        w.log.info({ download: release.version }, line.replace(/^liken: /, ""));
        const why = parseRangeIgnored(line);
        if (why !== undefined)
          void this.event("Warning", "RangeIgnored", rangeIgnoredMessage(release.version, why));
      },
      w.retryMs,
    );
  }

  start(): void {}

  /** The download action: from the Cluster's source, with the peers it assigns. */
  begin(seen: Observation, a: Extract<Action, { kind: "download" }>): Promise<void> {
    const source = seen.cluster?.spec.releases.source;
    if (source === undefined) return Promise.resolve();
    const peers = assignedPeers(seen.cluster, this.w.machine, a.release, (url, why) =>
      this.w.log.warn(
        { code: "LIKEN_PEER_ADDRESS_REFUSED", peer: url, release: a.release.version },
        `peer ${url} assigned for ${a.release.version} is refused (${why}): a downloader fetches only from http://<a Node's IP address>:<port>/, as cluster-operator hands out; the release comes from the other peers and the channel (docs/peers.md, "Which address is handed out")`,
      ),
    );
    return this.w
      .actions()
      .startDownload(source, a.slot, a.release, seen.o.running.slot, peers)
      .catch(async (e: unknown) => {
        // Refused before a child started (release.yaml missing or not the catalog's): the
        // action's failure is the status's last problem (daemon.ts); the Event says it too.
        const s = this.supervisor;
        const next = `next attempt in ${humanDelay(s.retryInMs)}`;
        await this.event("Warning", "DownloadFailed", `${errorText(e)}; ${next}`);
        throw e;
      });
  }

  status(seen: Observation): Promise<Partial<StatusExtras>> {
    if (seen.progress === undefined) return Promise.resolve({});
    const { indexNote, ...progress } = seen.progress;
    if (indexNote !== undefined && indexNote !== this.indexNote) {
      this.indexNote = indexNote;
      void this.runningSlotMismatch(indexNote);
    }
    return Promise.resolve({ progress });
  }

  /** The last note of an index pass made an Event: each is said once. */
  private indexNote: string | undefined;

  /**
   * The running slot is not what it records (an index pass found it, or its kept index did
   * not match its bytes): a Warning Event on the Machine (best effort, logged). The download
   * goes on; what the slot does not hold is fetched.
   */
  private async runningSlotMismatch(note: string): Promise<void> {
    const { log, api, view } = this.w;
    log.warn({ note }, "the running slot does not match its record");
    const m = view.machine;
    if (m === undefined) return;
    await api
      .machineEvent(m, "Warning", "RunningSlotMismatch", note)
      .catch((e: unknown) =>
        log.warn({ err: errorText(e) }, "RunningSlotMismatch Event not written"),
      );
  }

  stop(): Promise<void> {
    return this.w.actions().stopDownload("the agent stops");
  }

  private ended(end: DownloadEnd): void {
    const { release, slot } = end;
    const { log } = this.w;
    const retry = { inMs: this.supervisor.retryInMs, failures: this.supervisor.failures };
    const at = { version: release.version, slot, tail: "" };
    if (end.kind === "staged") {
      this.w.problem(undefined);
      log.info({ version: release.version, slot }, "download staged and verified");
    } else if (end.kind === "failed" || end.kind === "stalled") {
      const n =
        end.kind === "failed"
          ? failedNotice({ ...at, tail: end.said, exitCode: end.exitCode }, retry)
          : stalledNotice({ ...at, tail: end.said, idleMs: end.idleMs }, retry);
      this.w.problem({ reason: n.reason, message: n.message });
      log.warn({ version: release.version, reason: n.reason, stderr: end.said }, n.message);
      void this.event("Warning", n.reason, n.message);
    }
    this.w.wake();
  }

  /** An Event on the Machine (best effort: a failure to write it is logged). */
  private async event(type: "Normal" | "Warning", reason: string, message: string): Promise<void> {
    const { log, api, view } = this.w;
    const m = view.machine;
    if (m === undefined) return;
    await api
      .machineEvent(m, type, reason, message)
      .catch((e: unknown) => log.warn({ err: errorText(e) }, `${reason} Event not written`));
  }

  /** A peer the download dropped: a Warning Event on the Machine (best effort, logged). */
  private async peerDropped(release: ReleaseRef, d: PeerDrop): Promise<void> {
    const message = peerDroppedMessage(release.version, d);
    this.w.log.warn({ peer: d.peer, fault: d.fault, detail: d.detail }, "peer dropped");
    await this.event("Warning", "PeerDropped", message);
  }
}
