// What the agent downloads: the download child's supervisor (download.ts) as the daemon wires
// it. A download starts with the peers the Cluster assigns this machine (peer-serving.ts); its
// end reaches the status (a failure as the last problem, a staged release clearing it) and wakes
// the loop; each peer the child dropped is a PeerDropped Event on the Machine and a metric; the
// bytes so far go into every status; the child is stopped when the agent stops.
import type { Logger } from "pino";
import type { ReleaseRef } from "../api/types.js";
import { errorText } from "../errors.js";
import type { PeerDrop } from "../slots/peer-sources.js";
import type { Actions } from "./act.js";
import type { AgentApi } from "./api.js";
import { DownloadSupervisor, type DownloadEnd } from "./download.js";
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
    return this.w.actions().startDownload(source, a.slot, a.release, seen.o.running.slot, peers);
  }

  status(seen: Observation): Promise<Partial<StatusExtras>> {
    return Promise.resolve(seen.progress ? { progress: seen.progress } : {});
  }

  stop(): Promise<void> {
    return this.w.actions().stopDownload("the agent stops");
  }

  private ended(end: DownloadEnd): void {
    const { release, slot } = end;
    const { log } = this.w;
    if (end.kind === "staged") {
      this.w.problem(undefined);
      log.info({ version: release.version, slot }, "download staged and verified");
    } else if (end.kind === "failed") {
      const message = `${release.version} into slot ${slot}: ${end.said}`;
      this.w.problem({ reason: "DownloadFailed", message });
      log.warn(
        { version: release.version, code: end.exitCode, stderr: end.said },
        "download failed",
      );
    }
    this.w.wake();
  }

  /** A peer the download dropped: a Warning Event on the Machine (best effort, logged). */
  private async peerDropped(release: ReleaseRef, d: PeerDrop): Promise<void> {
    const { log, api, view } = this.w;
    const message = peerDroppedMessage(release.version, d);
    log.warn({ peer: d.peer, fault: d.fault, detail: d.detail }, "peer dropped");
    const m = view.machine;
    if (m === undefined) return;
    await api
      .machineEvent(m, "Warning", "PeerDropped", message)
      .catch((e: unknown) => log.warn({ err: errorText(e) }, "PeerDropped Event not written"));
  }
}
