// Runs the peer server to match planServing's answer (peer-serving.ts): starts it when the plan
// says serve, restarts it when the address or the rate changed, narrows what it serves at once
// when a release leaves the plan (the resolver asks the current plan on every request, so a
// release the Cluster dropped is refused from the next request on), and stops it when the plan
// says off. Its status() is what the agent writes to Machine status.peers. The server's module
// is imported when the plan first says serve: an agent whose Cluster leaves peers off never
// loads it (docs/agent.md, "Memory").
import type { PeerServing } from "../api/types.js";
import type { ListenAddress } from "../metrics/serve.js";
import type { PeerServer, Resolve } from "../slots/peer-serve.js";
import type { ServePlan } from "./peer-serving.js";

/** Builds the resolver over this machine's slots, asking `served` which digests it may serve. */
export type ResolverOf = (served: (releaseDigest: string) => boolean) => Resolve;

function sameAddress(a: ListenAddress, b: ListenAddress): boolean {
  return a.port === b.port && a.host === b.host;
}

export class PeerServingRun {
  private server: PeerServer | undefined;
  private running: { at: ListenAddress; bytesPerSecond: number } | undefined;
  private plan: ServePlan = { kind: "off", reason: "PeersDisabled" };

  constructor(
    private readonly resolverOf: ResolverOf,
    /** The host peers reach this machine at when the address binds every interface. */
    private readonly advertisedHost: string,
    /** Hears the body bytes each server sends (liken_peer_served_bytes_total). */
    private readonly onSent: (n: number) => void = () => {},
  ) {}

  async apply(plan: ServePlan): Promise<void> {
    this.plan = plan;
    if (plan.kind === "off") return this.stop();
    const r = this.running;
    if (r !== undefined && sameAddress(r.at, plan.at) && r.bytesPerSecond === plan.bytesPerSecond)
      return;
    await this.stop();
    const { startPeerServer } = await import("../slots/peer-serve.js");
    this.server = await startPeerServer({
      resolve: this.resolverOf((d) => this.serves(d)),
      rate: plan.bytesPerSecond,
      port: plan.at.port,
      onSent: this.onSent,
      ...(plan.at.host === undefined ? {} : { host: plan.at.host }),
    });
    this.running = { at: plan.at, bytesPerSecond: plan.bytesPerSecond };
  }

  private serves(digest: string): boolean {
    return this.plan.kind === "serve" && this.plan.releases.some((r) => r.digest === digest);
  }

  /** Machine status.peers: where it serves and what; undefined while it serves nothing. */
  status(): PeerServing | undefined {
    if (this.plan.kind === "off" || this.server === undefined) return undefined;
    const port = new URL(this.server.url).port;
    const host = this.plan.at.host ?? this.advertisedHost;
    const h = host.includes(":") ? `[${host}]` : host;
    return { url: `http://${h}:${port}/`, releases: this.plan.releases };
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    this.running = undefined;
    await s?.close();
  }
}
