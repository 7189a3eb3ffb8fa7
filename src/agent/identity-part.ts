// The machine's identity while the agent runs (identity/): its certificate renewed, the API
// client switched to each new one (a watch under way keeps its connection: api/rest.ts,
// useClientCertificate) and the loop woken; its expiry and the IdentityCurrent condition in
// every status. Without an identity joined for (a kubeconfig as given), nothing is renewed and
// the status reports that certificate's expiry as Provided.
import type { Rest } from "../api/rest.js";
import { providedStatus, type MachineIdentity } from "./identity/identity.js";
import type { SidePart } from "./side-part.js";
import type { StatusExtras } from "./status.js";

export class IdentityPart implements SidePart {
  private renewals: Promise<void> | undefined;

  constructor(
    private readonly identity: MachineIdentity | undefined,
    /** The API client whose certificate is renewed and reported. */
    private readonly rest: Rest,
    /** Ends the renewals (the agent stops). */
    private readonly signal: AbortSignal,
    /** Told of each new certificate. */
    private readonly renewed: () => void,
  ) {}

  start(): void {
    this.renewals = this.identity?.renewLoop(this.rest, this.signal, this.renewed);
  }

  /** certificateExpiry and IdentityCurrent for the status (identity/renewal.ts). */
  status(): Promise<Partial<StatusExtras>> {
    const now = Date.now();
    const s = this.identity?.status(now) ?? providedStatus(this.rest.config.cert, now);
    return Promise.resolve(s === undefined ? {} : { identity: s });
  }

  async stop(): Promise<void> {
    await this.renewals;
  }
}
