// The machine's identity over its life (docs/machine.md, "Identity"): join with the fleet's
// shared bootstrap credential when it has no certificate of its own, renew with its own
// certificate at 70-90 % of each lifetime, switch the agent's connections to the new one only
// once it has answered, and join again with the bootstrap credential when a certificate
// expired anyway (a machine powered off past its notAfter), or when the API server keeps
// refusing one still valid (401s: the client CA rotated, the certificate revoked;
// refusals.ts). Phases log their begin and end.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { loadRestConfig, Rest, type RestConfig } from "../../api/rest.js";
import { authenticatedUser } from "../../api/self-review.js";
import { isUnauthorized } from "../../api/errors.js";
import { rfc3339 } from "../../api/time.js";
import { rejoinAnnotations } from "../../api/rejoin-proof.js";
import { agentUserName } from "../../api/types.js";
import { errorCode, errorText } from "../../errors.js";
import { sdNotify } from "../../native/index.js";
import { AgentError } from "../errors.js";
import {
  installIssued,
  PENDING_KEY,
  pruneIssued,
  readHeld,
  writeAtomically,
  writeKubeconfig,
  type Held,
} from "./files.js";
import { identityCondition, renewAtMs, type IdentitySource } from "./renewal.js";
import { newKey, requestCertificate } from "./request.js";
import {
  NO_REFUSALS,
  noteAnswer,
  REJOIN_AFTER_401S,
  rejoinDue,
  rejoined,
  type RefusalState,
} from "./refusals.js";

export { providedStatus } from "./provided.js";

/** Why the agent joins with the bootstrap credential. */
type JoinWhy = "none" | "expired" | "refused";

export interface IdentitySettings {
  /** The kubeconfig the agent writes and authenticates with. */
  kubeconfig: string;
  /** The fleet's shared bootstrap credential (a kubeconfig with the bootstrap token). */
  bootstrapKubeconfig: string;
  /** spec.expirationSeconds of each request; the signer may issue shorter. */
  expirationSeconds: number;
  /** After this long unapproved, the agent says so (log; the Machine once it can write). */
  approvalWarnMs: number;
}

/**
 * After a denied request, or a failed renewal, the next try waits this long at most: the
 * approver's flood rule allows 3 requests per minute for one name (src/operator/identity/), and a
 * certificate in its last tenth still has time for several tries.
 */
export const RETRY_MAX_MS = 60_000;
const RETRY_MIN_MS = 2_000;
const SOURCE_FILE = "liken-client-current.source";
const SOURCES: readonly IdentitySource[] = ["Joined", "Renewed", "Rejoined", "Provided"];

export class MachineIdentity {
  private readonly dir: string;
  private held: Held | undefined;
  private source: IdentitySource = "Provided";
  private slow: string | undefined;
  /** This certificate's draw within the renewal window (drawn again for each certificate). */
  private jitter = Math.random();
  /** The 401s the API server answered the agent's own client (refusals.ts). */
  private refusals: RefusalState = NO_REFUSALS;

  constructor(
    private readonly machine: string,
    private readonly s: IdentitySettings,
    private readonly log: Logger,
  ) {
    this.dir = path.dirname(s.kubeconfig);
  }

  /** The Machine's certificateExpiry and IdentityCurrent, as of `nowMs`. */
  status(nowMs: number):
    | {
        certificateExpiry: string;
        certificateKeyDigest?: string;
        condition: ReturnType<typeof identityCondition>;
      }
    | undefined {
    const h = this.held;
    if (h === undefined) return undefined;
    return {
      certificateExpiry: rfc3339(new Date(h.notAfterMs)),
      certificateKeyDigest: h.keyDigest,
      condition: identityCondition(h, this.source, nowMs),
    };
  }

  /**
   * Before the agent talks to the API server: a certificate that is valid now, joined for
   * with the bootstrap credential when there is none or it expired. Waits as long as it takes
   * (the agent can do nothing without an identity), saying why every approvalWarnMs.
   */
  async ensure(signal: AbortSignal): Promise<void> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.held = readHeld(this.dir);
    this.source = this.readSource();
    const now = Date.now();
    if (this.held !== undefined && this.held.notAfterMs > now && existsSync(this.s.kubeconfig)) {
      return;
    }
    await this.join(signal, this.held === undefined ? "none" : "expired");
  }

  /** A certificate of its own, obtained with the bootstrap credential, proven and installed. */
  private async join(signal: AbortSignal, why: JoinWhy): Promise<void> {
    const rejoin = why !== "none";
    const phase = rejoin ? "rejoin" : "join";
    const notAfter = this.held === undefined ? {} : { notAfter: iso(this.held.notAfterMs) };
    this.log.info(
      { phase, ...(why === "expired" ? { expired: iso(this.held!.notAfterMs) } : notAfter) },
      JOIN_WHY[why],
    );
    const boot = this.bootstrapConfig();
    // The bootstrap kubeconfig is read again for each attempt: a person who replaces a revoked
    // token needs no restart.
    const client = (): Rest =>
      new Rest(this.bootstrapConfig(), `liken-agent/${this.machine} (bootstrap)`);
    const cert = await this.obtainProven(client, signal, "bootstrap", {
      server: boot.server,
      ...(boot.ca === undefined ? {} : { ca: boot.ca }),
      ...(boot.tlsServerName === undefined ? {} : { tlsServerName: boot.tlsServerName }),
      ...(boot.insecure === undefined ? {} : { insecure: boot.insecure }),
    });
    writeKubeconfig(this.s.kubeconfig, {
      server: boot.server,
      ...(boot.ca === undefined ? {} : { caData: boot.ca.toString("base64") }),
      ...(boot.tlsServerName === undefined ? {} : { tlsServerName: boot.tlsServerName }),
      user: agentUserName(this.machine),
    });
    this.install(cert.certPem, cert.keyPem, rejoin ? "Rejoined" : "Joined");
    this.log.info({ phase, notAfter: iso(this.held!.notAfterMs) }, "joined");
  }

  /**
   * Renews for as long as `signal` is not aborted, switching `rest` (the agent's client) to
   * each new certificate once it has answered. `changed` is told after every switch. The
   * answers `rest` gets are counted: a certificate the API server keeps refusing (401) while it
   * is still valid is replaced by joining again with the bootstrap credential (refusals.ts).
   */
  async renewLoop(rest: Rest, signal: AbortSignal, changed: () => void): Promise<void> {
    let wake: (() => void) | undefined;
    const stopCounting = rest.onAnswer((status) => {
      this.refusals = noteAnswer(this.refusals, status, Date.now());
      if (rejoinDue(this.refusals, Date.now())) wake?.();
    });
    try {
      await this.renewals(rest, signal, changed, (fn) => (wake = fn));
    } finally {
      stopCounting();
    }
  }

  private async renewals(
    rest: Rest,
    signal: AbortSignal,
    changed: () => void,
    onWake: (fn: () => void) => void,
  ): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      const h = this.held;
      if (h === undefined) return;
      const at = renewAtMs(h, this.jitter);
      const wait = failures === 0 ? at - Date.now() : this.retryMs(h, failures);
      const refused = rejoinDue(this.refusals, Date.now());
      if (wait > 0 && !refused) {
        // Node's timers hold 2^31-1 ms (24.8 days); a longer wait is taken in steps. Refused
        // answers wake it early.
        const woken = new AbortController();
        onWake(() => woken.abort());
        const both = AbortSignal.any([signal, woken.signal]);
        const slept = await sleep(Math.min(wait, 2 ** 31 - 1), true, { signal: both }).catch(
          () => false,
        );
        if (signal.aborted) return;
        if (!slept || wait > 2 ** 31 - 1) continue;
      }
      try {
        if (refused) {
          await this.rejoinRefused(rest, signal);
        } else if (this.held!.notAfterMs <= Date.now()) {
          // Renewals failed until the end: only the bootstrap credential can help now.
          await this.ensure(signal);
          this.switchTo(rest);
        } else {
          await this.renewOnce(rest, signal);
        }
        failures = 0;
        changed();
      } catch (e) {
        if (signal.aborted) return;
        if (errorCode(e) === "LIKEN_AGENT_IDENTITY_EXPIRED") {
          // Next turn: the certificate has expired, so the bootstrap credential is used at once.
          this.log.warn({ err: errorText(e), code: errorCode(e) }, "certificate renewal failed");
          failures = 0;
          continue;
        }
        failures++;
        this.log.warn(
          { err: errorText(e), code: errorCode(e), failures },
          "certificate renewal failed; the current certificate stays in use",
        );
      }
    }
  }

  /**
   * The API server refused the certificate, still valid, REJOIN_AFTER_401S times in a row and
   * for a while: say so once, with a stable code, and join again with the bootstrap credential.
   */
  private async rejoinRefused(rest: Rest, signal: AbortSignal): Promise<void> {
    const r = this.refusals;
    const h = this.held!;
    this.refusals = rejoined(r, Date.now());
    this.log.warn(
      {
        code: "LIKEN_AGENT_IDENTITY_NOT_ACCEPTED",
        refused: r.count,
        since: r.sinceMs === undefined ? undefined : iso(r.sinceMs),
        notAfter: iso(h.notAfterMs),
        nextRejoinAfter: iso(this.refusals.nextMs),
      },
      `machine ${this.machine}'s client certificate, valid until ${iso(h.notAfterMs)}, is not accepted by the API server: ` +
        `${r.count} answers in a row were 401 (at least ${REJOIN_AFTER_401S}, over ${Math.round((Date.now() - (r.sinceMs ?? Date.now())) / 1000)} s; ` +
        `the cluster's client CA rotated, or the certificate was revoked); the agent joins again with the bootstrap credential (docs/machine.md, "Identity")`,
    );
    await this.join(signal, "refused");
    this.switchTo(rest);
  }

  /** What status() reports while a request waits unapproved (for the log and the Machine). */
  get waiting(): string | undefined {
    return this.slow;
  }

  private async renewOnce(rest: Rest, signal: AbortSignal): Promise<void> {
    this.log.info(
      { phase: "renew", notAfter: new Date(this.held!.notAfterMs).toISOString() },
      "renewing the client certificate",
    );
    // Keep the old one until the new one works: the new pair must prove itself first.
    const { certPem, keyPem } = await this.obtainProven(() => rest, signal, "own", rest.config);
    this.install(certPem, keyPem, "Renewed");
    this.switchTo(rest);
    this.log.info(
      { phase: "renew", notAfter: new Date(this.held!.notAfterMs).toISOString() },
      "renewed",
    );
  }

  /**
   * A certificate obtained and proven: it carries the public half of the key this machine
   * made, and one request authenticated by the pair comes back as this machine. A certificate
   * that fails either is never installed: the first join (an approver or a signer that issued
   * something else) as much as a renewal. `server` is where to ask: the API server and its CA,
   * without the credential that filed the request.
   */
  private async obtainProven(
    client: () => Rest,
    signal: AbortSignal,
    by: "own" | "bootstrap",
    server: RestConfig,
  ): Promise<{ certPem: string; keyPem: string }> {
    for (;;) {
      const got = await this.obtain(client, signal, by);
      let wrong: string | undefined;
      for (let attempt = 1; ; attempt++) {
        try {
          wrong = await this.prove(server, got.certPem, got.keyPem);
          break;
        } catch (e) {
          // The API server did not answer: the certificate is not at fault, ask again.
          const pause = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.min(attempt, 5));
          this.log.warn(
            { err: errorText(e), code: errorCode(e), attempt, retryInMs: pause },
            "checking the issued certificate failed",
          );
          await sleep(pause, undefined, { signal });
        }
      }
      if (wrong === undefined) return got;
      // The request is spent; the next one is filed with a new key after a pause.
      rmSync(path.join(this.dir, PENDING_KEY), { force: true });
      this.log.warn({ code: "LIKEN_AGENT_IDENTITY_REFUSED", retryInMs: RETRY_MAX_MS }, wrong);
      await sleep(RETRY_MAX_MS, undefined, { signal });
    }
  }

  /** Why `certPem` with `keyPem` is not this machine's identity, or undefined when it is. */
  private async prove(
    server: RestConfig,
    certPem: string,
    keyPem: string,
  ): Promise<string | undefined> {
    const who = agentUserName(this.machine);
    const keep = `the certificate is not installed (docs/machine.md, "Identity"); the agent files a new request with a new key`;
    try {
      if (!new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem)))
        return `the certificate issued for machine ${this.machine} does not carry the public half of the key this machine made; ${keep}`;
    } catch (e) {
      return `the certificate issued for machine ${this.machine} cannot be read (${errorText(e)}); ${keep}`;
    }
    const probe = new Rest({
      ...server,
      token: undefined,
      tokenFile: undefined,
      cert: Buffer.from(certPem),
      key: Buffer.from(keyPem),
    });
    let user: string | undefined;
    try {
      user = await authenticatedUser(probe);
    } catch (e) {
      if (!isUnauthorized(e)) throw e;
      return `the certificate issued for machine ${this.machine} is not accepted by the API server (401); ${keep}`;
    }
    return user === who
      ? undefined
      : `the certificate issued for machine ${this.machine} authenticates as ${user ?? "nobody"}, not ${who}; ${keep}`;
  }

  private switchTo(rest: Rest): void {
    const pem = readFileSync(this.held!.file);
    rest.useClientCertificate(pem, pem);
  }

  /**
   * A request filed and waited for; a denial is tried again with a new key after a pause.
   * `by`: the credential that files and reads it. The machine's own certificate stops being
   * used the moment it has expired (LIKEN_AGENT_IDENTITY_EXPIRED: the caller joins again with
   * the bootstrap credential, which finds the same request by its key and reads its approval
   * whenever it comes); the bootstrap credential is asked again until it works, since nothing
   * else can give the machine an identity.
   */
  private async obtain(
    client: () => Rest,
    signal: AbortSignal,
    by: "own" | "bootstrap",
  ): Promise<{ certPem: string; keyPem: string }> {
    const keyFile = path.join(this.dir, PENDING_KEY);
    for (let attempt = 1; ; attempt++) {
      let keyPem: string;
      if (existsSync(keyFile)) keyPem = readFileSync(keyFile, "utf8");
      else {
        keyPem = newKey();
        writeAtomically(keyFile, keyPem);
      }
      try {
        const proof = by === "bootstrap" ? this.rejoinProof(keyPem) : undefined;
        const certPem = await requestCertificate(client(), {
          ...(proof === undefined ? {} : { annotations: proof }),
          machine: this.machine,
          keyPem,
          expirationSeconds: this.s.expirationSeconds,
          warnAfterMs: this.s.approvalWarnMs,
          log: this.log,
          signal,
          onSlow: (m) => {
            this.slow = m;
            // Before its first join the machine has no Machine it may write: systemd's status
            // line (`systemctl status liken-agent`) says what it waits for.
            sdNotify(`STATUS=${m}`);
          },
        });
        if (this.slow !== undefined) sdNotify("STATUS=certificate issued");
        this.slow = undefined;
        return { certPem, keyPem };
      } catch (e) {
        if (signal.aborted) throw e;
        const h = this.held;
        if (by === "own" && h !== undefined && h.notAfterMs <= Date.now()) {
          // Its own certificate can no longer file or read anything (the API server answers
          // 401): asking again with it would go on for ever.
          throw new AgentError(
            "LIKEN_AGENT_IDENTITY_EXPIRED",
            `machine ${this.machine}'s client certificate expired at ${new Date(h.notAfterMs).toISOString()} while its renewal request waited (${errorText(e)}); the agent joins again with the bootstrap credential, which reads the same request and its approval whenever it comes (docs/machine.md, "Identity")`,
            { cause: e },
          );
        }
        // A refused request is final: the next one is a new request with a new key.
        if (errorCode(e) === "LIKEN_AGENT_IDENTITY_REFUSED") rmSync(keyFile, { force: true });
        const pause = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.min(attempt, 5));
        if (by === "bootstrap" && isUnauthorized(e)) {
          this.log.error(
            { code: "LIKEN_AGENT_IDENTITY_UNAVAILABLE", attempt, retryInMs: pause },
            `machine ${this.machine} has no valid certificate and the API server refuses its bootstrap credential ${this.s.bootstrapKubeconfig} (401: the token expired or its Secret was deleted); put a valid bootstrap kubeconfig there (it is read again at each try) or give the machine a kubeconfig by hand (docs/machine.md, "Identity")`,
          );
          await sleep(pause, undefined, { signal });
          continue;
        }
        this.log.warn(
          { err: errorText(e), code: errorCode(e), attempt, retryInMs: pause },
          "certificate request failed",
        );
        await sleep(pause, undefined, { signal });
      }
    }
  }

  /**
   * When the machine joins again while its certificate is valid by its dates (the API server
   * refuses it: the client CA rotated), that certificate's key signs the new request: the
   * approver takes the name back only for the key the Machine last reported
   * (docs/adr/rejoin-after-ca-rotation.md). Undefined when there is no such certificate.
   */
  private rejoinProof(keyPem: string): Record<string, string> | undefined {
    const h = this.held;
    if (h === undefined || h.notAfterMs <= Date.now()) return undefined;
    try {
      return rejoinAnnotations(this.machine, keyPem, readFileSync(h.file), new Date());
    } catch (e) {
      // Without a proof the approver leaves the request to a person (AlreadyJoined): said here.
      this.log.warn(
        { err: errorText(e), file: h.file },
        "the current certificate's key cannot sign the rejoin proof; the request goes without it",
      );
      return undefined;
    }
  }

  private install(certPem: string, keyPem: string, source: IdentitySource): void {
    installIssued(this.dir, certPem, keyPem, Date.now());
    rmSync(path.join(this.dir, PENDING_KEY), { force: true });
    writeAtomically(path.join(this.dir, SOURCE_FILE), source);
    pruneIssued(this.dir);
    this.held = readHeld(this.dir);
    this.source = source;
    this.jitter = Math.random();
  }

  private readSource(): IdentitySource {
    try {
      const text = readFileSync(path.join(this.dir, SOURCE_FILE), "utf8").trim();
      return SOURCES.find((s) => s === text) ?? "Provided";
    } catch {
      return "Provided";
    }
  }

  /** A tenth of what is left, within RETRY_MIN_MS..RETRY_MAX_MS, doubling per failure. */
  private retryMs(h: Held, failures: number): number {
    const left = h.notAfterMs - Date.now();
    const base = Math.min(RETRY_MAX_MS, Math.max(RETRY_MIN_MS, left / 10));
    const backoff = Math.min(RETRY_MAX_MS, base * 2 ** Math.min(failures - 1, 5));
    // Up to the expiry (the bootstrap credential is used from then on); a join that failed
    // after it is tried again at the same pace, never in a busy loop.
    return left > 0 ? Math.min(backoff, left) : backoff;
  }

  private bootstrapConfig(): RestConfig {
    try {
      return loadRestConfig(this.s.bootstrapKubeconfig);
    } catch (e) {
      throw new AgentError(
        "LIKEN_AGENT_IDENTITY_UNAVAILABLE",
        `machine ${this.machine} has no valid certificate and its bootstrap credential ${this.s.bootstrapKubeconfig} cannot be read (${errorText(e)}); put the fleet's bootstrap kubeconfig there, or give the machine a kubeconfig by hand (docs/machine.md, "Identity")`,
        { cause: e },
      );
    }
  }
}

const JOIN_WHY: Record<JoinWhy, string> = {
  none: "no client certificate yet: joining with the bootstrap credential",
  expired: "the client certificate expired: joining again with the bootstrap credential",
  refused:
    "the client certificate is not accepted by the API server: joining again with the bootstrap credential",
};

const iso = (ms: number): string => new Date(ms).toISOString();
