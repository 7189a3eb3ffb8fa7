// The liken.sh/v1alpha1 API as TypeScript: the shapes of Cluster and Machine, the closed
// string unions the CRDs enforce as enums, and the names (group, plurals, annotation, labels,
// the heartbeat Lease convention) every other part of liken uses. The CRDs in config/crd/
// are the server's copy of the same contract; test/unit/api-schema.test.ts keeps the enums
// and names here equal to theirs.
//
// Ownership, so two writers never fight over a field:
//   Cluster.spec            people (kubectl edit), never the operator or an agent
//   Cluster.status          cluster-operator only
//   Machine.spec            people and `liken approve-reboot` / `liken rollout resume`;
//                           an agent may create its own Machine but never change its spec
//   Machine.status          the machine's own agent; cluster-operator writes only
//                           `step: Lost` (and the Alive condition) when the heartbeat stops
// The ValidatingAdmissionPolicy in config/admission/ enforces the agent's part.

export const GROUP = "liken.sh";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;

export const CLUSTER_KIND = "Cluster";
export const CLUSTER_PLURAL = "clusters";
export const MACHINE_KIND = "Machine";
export const MACHINE_PLURAL = "machines";

/** Changing its value (to anything) asks cluster-operator to read the channel now. */
export const ANNOTATION_CHECK_RELEASES = "liken.sh/check-releases";
/**
 * On a Machine: changing its value (to anything) asks the agent to forget its
 * status.failedReleases and try the target again. Set by a person, never by the agent.
 */
export const ANNOTATION_RETRY = "liken.sh/retry";
/**
 * On a Machine: set by a person before rotating the client CA because this machine's key
 * leaked (`liken.sh/rejoin: manual`). While it is there cluster-operator approves no request
 * of the bootstrap credential for this machine, a rejoin proven by its old key included: a
 * person approves by hand and removes it afterwards (docs/machine.md, "Identity"). On
 * metadata, not status: the machine's own identity may write only its Machine's status
 * (config/rbac/agent.yaml, config/admission/), and a write of status keeps metadata as it was,
 * so a leaked machine key cannot remove it.
 */
export const ANNOTATION_REJOIN = "liken.sh/rejoin";
/** The value of liken.sh/rejoin that docs/machine.md gives; any value is read as it. */
export const REJOIN_MANUAL = "manual";

/**
 * Convenience label on Machines and heartbeat Leases naming the Cluster. The truth is
 * Machine.spec.cluster (immutable, and a selectable field: `--field-selector spec.cluster=X`).
 */
export const LABEL_CLUSTER = "liken.sh/cluster";
/** Label on a heartbeat Lease naming its Machine. */
export const LABEL_MACHINE = "liken.sh/machine";
/**
 * Label on a Cluster naming its ring (canary, early, broad...): how the people of a fleet
 * group clusters. A label, not a spec field: `kubectl get clusters -l` and `liken fleet status
 * --selector` select by it, and the operator exports it on liken_operator_cluster_info so the
 * dashboard groups by it (docs/fleet.md).
 */
export const LABEL_RING = "liken.sh/ring";

/** Field selectors the Machine CRD declares (`selectableFields`). */
export const FIELD_MACHINE_CLUSTER = "spec.cluster";
export const FIELD_MACHINE_NODE = "spec.nodeName";

/**
 * Heartbeats are cheap: each agent renews a coordination.k8s.io/v1 Lease named after its
 * Machine in this namespace (as kubelets do in kube-node-lease), instead of writing its
 * Machine's status every few seconds. The operator watches the Leases in this namespace.
 */
export const HEARTBEAT_NAMESPACE = "liken-heartbeats";
/** The namespace cluster-operator runs in and keeps its leader-election Lease in. */
export const OPERATOR_NAMESPACE = "liken-system";

export function heartbeatLeaseName(machine: string): string {
  return machine;
}

/** The metadata of a new heartbeat Lease: its name and the labels the operator selects by. */
export function heartbeatLeaseMetadata(
  name: string,
  machine: string,
  cluster: string,
): { name: string; labels: Record<string, string> } {
  // A label value holds at most 63 characters; a Machine or Cluster name up to 253. A longer
  // name is left out of the labels (the Lease would be refused whole, and the machine would
  // read Lost): the Lease's name is the Machine's, and readers fall back to it.
  const labels: Record<string, string> = {};
  if (cluster.length <= LABEL_VALUE_MAX_LENGTH) labels[LABEL_CLUSTER] = cluster;
  if (machine.length <= LABEL_VALUE_MAX_LENGTH) labels[LABEL_MACHINE] = machine;
  return { name, labels };
}

/** Kubernetes' bound on a label value (apimachinery validation.LabelValueMaxLength). */
export const LABEL_VALUE_MAX_LENGTH = 63;

/** A machine silent this long reads Lost (the page: "40 seconds pass with no heartbeat"). */
export const LOST_AFTER_SECONDS = 40;
/** A freshly started operator grants nothing this long (the page: "its first 40 seconds"). */
export const START_GRACE_SECONDS = 40;

/**
 * The identity an agent authenticates as (client certificate CN / O, or a token file
 * entry). The admission policy ties `liken:machine:<name>` to the Machine named <name>.
 */
export const AGENT_USER_PREFIX = "liken:machine:";
export const AGENT_GROUP = "liken:machines";

export function agentUserName(machine: string): string {
  return `${AGENT_USER_PREFIX}${machine}`;
}

/**
 * A machine's own identity comes from a CertificateSigningRequest to this signer (the API
 * server trusts what it issues as client certificates), for CN=liken:machine:<name>,
 * O=liken:machines, with exactly these usages (docs/machine.md, "Identity").
 */
export const MACHINE_SIGNER = "kubernetes.io/kube-apiserver-client";
export const MACHINE_CSR_USAGES: readonly string[] = ["client auth"];
/**
 * The group the fleet's shared bootstrap token adds (its Secret's auth-extra-groups): it may
 * only file and read CertificateSigningRequests (config/rbac/bootstrap.yaml,
 * docs/adr/machine-bootstrap-token.md).
 */
export const BOOTSTRAP_GROUP = "system:bootstrappers:liken";

// Patterns and bounds, the same numbers as in the CRDs.
export const VERSION_PATTERN = /^[0-9A-Za-z][0-9A-Za-z._+-]*$/;
export const VERSION_MAX_LENGTH = 64;
export const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;
export const CATALOG_MAX_ITEMS = 512;
export const SOURCE_MAX_LENGTH = 2048;
export const LEADERS_MAX_ITEMS = 32;
export const REBOOT_TURNS_MAX_ITEMS = 1024;
export const FAILED_RELEASES_MAX_ITEMS = 16;
export const CONDITIONS_MAX_ITEMS = 16;

// ---------------------------------------------------------------------------------------
// Shared pieces

export interface ObjectMeta {
  name: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

/** RFC 3339 timestamp in UTC, as Kubernetes writes them ("2026-12-02T11:40:00Z"). */
export type Time = string;

export type ConditionStatus = "True" | "False" | "Unknown";

/** The standard metav1.Condition. */
export interface Condition<Type extends string = string, Reason extends string = string> {
  type: Type;
  status: ConditionStatus;
  /** Machine-readable CamelCase reason. */
  reason: Reason;
  /** What happened, to what, and what to do next. */
  message: string;
  lastTransitionTime: Time;
  observedGeneration?: number;
}

/** A release as the catalog names it: the version and the digest of its release.yaml. */
export interface ReleaseRef {
  version: string;
  /** `sha256:` + 64 lowercase hex: the SHA-256 of the release's release.yaml. */
  digest: string;
}

/** Both name the same release: the same version and the same digest (undefined matches nothing). */
export function sameRelease(a: ReleaseRef | undefined, b: ReleaseRef | undefined): boolean {
  return a !== undefined && b !== undefined && a.version === b.version && a.digest === b.digest;
}

// ---------------------------------------------------------------------------------------
// Cluster

export interface ClusterSpec {
  /** The release every machine should run; must name an entry of releases.catalog. */
  version?: string;
  releases: {
    /** Base URL of the release channel (`<source>/channel.yaml`, `<source>/<v>/release.yaml`). */
    source: string;
    /** Releases this cluster trusts; versions are unique. */
    catalog?: ReleaseRef[];
    /** Who vouches for a release's digest: the catalog (default), a signed channel, or both. */
    trust?: TrustSpec;
  };
  disruption?: {
    /** Integer >= 1 or a percentage "1%".."100%" of the machines (rounded up, at least 1). */
    maxUnavailable?: number | string;
    /** When turns may be granted; absent or empty: always. */
    windows?: MaintenanceWindow[];
    /** How long a machine's drain may take before onDrainTimeout applies (default 3600). */
    drainTimeoutSeconds?: number;
    /** Stall (default): keep the turn, the rollout stalls. Skip: give it back, go last. */
    onDrainTimeout?: DrainTimeoutPolicy;
    /**
     * Seconds between taking a machine's Node out of the external load balancers (the label
     * node.kubernetes.io/exclude-from-external-load-balancers, with the cordon) and its first
     * eviction, so that connections drain before pods move. Absent or 0: no label, no wait.
     */
    excludeFromLoadBalancersSeconds?: number;
    /**
     * Pods whose presence on a machine's node holds that machine's turn (kured's blocking-pod
     * selector): the agent asks for no turn while one runs there, and its status names it.
     */
    blockingPods?: BlockingPods[];
  };
  rollout?: RolloutSpec;
  /** What must be true on a machine's trial boot before the agent promotes it. */
  health?: HealthSpec;
  /** Machines serve verified chunks to each other (docs/peers.md); off unless enabled. */
  peers?: PeersSpec;
}

export interface PeersSpec {
  /** true: agents serve the releases they hold, the operator assigns peers (default false). */
  enabled?: boolean;
  /** Bytes a second one machine sends to all its peers together (default 50 MiB/s). */
  maxUploadBytesPerSecond?: number;
  /** Machines that download from the channel at once while none holds the release (default 1). */
  channelMachines?: number;
}

/** spec.peers' defaults, as the CRD writes them (an object read without defaulting gets these). */
export const PEERS_DEFAULTS = {
  enabled: false,
  maxUploadBytesPerSecond: 50 * 1024 * 1024,
  channelMachines: 1,
} as const;

export const TRUST_MODES = ["pinned", "channel", "channel+pinned"] as const;
/**
 * pinned: the catalog vouches (the channel is read only for AVAILABLE); channel: the signed
 * channel (TUF) vouches, no catalog entry needed; channel+pinned: both, and they must agree.
 */
export type TrustMode = (typeof TRUST_MODES)[number];

export interface TrustSpec {
  mode: TrustMode;
  /** The channel's name in the signed repository (stable, beta); channel modes. */
  channel?: string;
  /** sha256:<hex> of the channel's first root (tuf/1.root.json), pinned once; channel modes. */
  rootDigest?: string;
  /** An air-gapped fleet: metadata expired up to this many seconds is still accepted. */
  acceptExpiredSeconds?: number;
  /** Take the channel's newest release by itself (spec.version stays unset). */
  follow?: FollowSpec;
}

export interface FollowSpec {
  /** A release is taken only once it has been in the channel this long. */
  delaySeconds?: number;
  /** Over how long the waves of a release open (the release's own setting wins). */
  waveSeconds?: number;
  /**
   * Follow only a release whose signed target carries at least this much evidence from the
   * ring before (`liken promote`; src/release-decision/evidence.ts checks it, docs/rings.md).
   */
  requireEvidence?: RequireEvidence;
}

/** How much signed evidence a followed release must carry (every field optional, all must hold). */
export interface RequireEvidence {
  /** Clusters of the ring before that proved it. */
  clusters?: number;
  /** Machines, over those clusters, that proved it. */
  machines?: number;
  /** How long the least soaked of those clusters ran it without a revert, in seconds. */
  soakSeconds?: number;
}

/**
 * Health gates on the Cluster: on a trial boot, the agent promotes the new slot only once
 * these pass (with its own host commands, agent.yaml health.commands) within its prove
 * deadline; otherwise it reboots without promoting and reports HealthCheckFailed.
 */
export interface HealthSpec {
  /** Pods that must be Ready on the machine's node: at least one matches, every match Ready. */
  pods?: HealthPods[];
}

export interface HealthPods {
  namespace: string;
  selector: LabelSelector;
}

/** One set of pods that holds a turn while it runs on the machine's node. */
export interface BlockingPods {
  /** Absent: every namespace. */
  namespace?: string;
  selector: LabelSelector;
}
export const BLOCKING_PODS_MAX_ITEMS = 16;

export const SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;

/** metav1.LabelSelector, never empty here (an empty one would match every pod). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: {
    key: string;
    operator: (typeof SELECTOR_OPERATORS)[number];
    values?: string[];
  }[];
}
export const HEALTH_PODS_MAX_ITEMS = 16;

export const DRAIN_TIMEOUT_POLICIES = ["Stall", "Skip"] as const;
export type DrainTimeoutPolicy = (typeof DRAIN_TIMEOUT_POLICIES)[number];
/** kubectl drain has no default; an hour covers StatefulSets that roll one pod at a time. */
export const DEFAULT_DRAIN_TIMEOUT_SECONDS = 3600;

export const WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"] as const;
export type Weekday = (typeof WEEKDAYS)[number];
/** "HH:MM", 00:00 to 23:59. */
export const WINDOW_START_PATTERN = /^([01][0-9]|2[0-3]):[0-5][0-9]$/;
/** "4h", "90m", "1h30m": at least one minute, at most 7 days (checked in CEL and in code). */
export const WINDOW_DURATION_PATTERN = /^([0-9]{1,3}h)?([0-9]{1,5}m)?$/;
export const WINDOWS_MAX_ITEMS = 32;

/** A weekly opening in which cluster-operator may grant reboot turns. */
export interface MaintenanceWindow {
  /** The days the window opens on (in its time zone). */
  days: Weekday[];
  /** When it opens on those days, "HH:MM" wall-clock time in timeZone. */
  start: string;
  /** How long it stays open, "4h", "90m" or "1h30m". */
  duration: string;
  /** An IANA time zone name, e.g. "Europe/Berlin"; default UTC. */
  timeZone?: string;
}

export interface RolloutSpec {
  /**
   * How many machines may fail their trial of spec.version before cluster-operator grants
   * no further turn for it (0: never stop). Default 1. Until one machine proved the release,
   * at most this many minus the failures try it at a time.
   */
  maxFailedTrials?: number;
  /** Set by `liken rollout resume CLUSTER --failed-release`: more trials after failures. */
  failedReleaseResume?: FailedReleaseResume;
  /** How long a machine back on the new release stays Ready before its turn is released. */
  soakSeconds?: number;
  /** The first turns of each release go to a few machines; then granting pauses. */
  canary?: CanarySpec;
  /** Set by `liken rollout continue CLUSTER`: the canary of this release passed. */
  canaryContinue?: CanaryContinue;
  /**
   * The fleet-wide stop switch (`liken rollout pause|resume CLUSTER`): no new reboot
   * turn for anything while true; downloads and staging go on, turns held finish.
   */
  paused?: boolean;
  /** Revert by itself on a threshold (docs/revert.md). */
  revert?: RevertPolicy;
  /**
   * A person's (or GitOps') request to revert spec.version's release to the last good one
   * (`liken rollout revert CLUSTER`): it names the release to leave, exactly.
   */
  revertRequest?: RevertRequest;
  /**
   * Written by `liken rollout unrevoke CLUSTER VERSION`: a person cleared this release's
   * revocation; it applies to revocations (and reverts, and revert requests) made before `at`.
   */
  unrevoke?: RevertRequest;
}

/**
 * The automatic revert: once failed trials or failed post-promotion health checks of the
 * target reach maxFailures machines or maxFailurePercent of those that took it, within
 * watchSeconds after the release became the last known good (and at any time before),
 * cluster-operator reverts the fleet to the last known good release before it.
 */
export interface RevertPolicy {
  /** How many failed machines trip it (0: never by count). */
  maxFailures?: number;
  /** What share of the machines that took the release trips it, 1-100 (unset: never by share). */
  maxFailurePercent?: number;
  /** How long after the release became the last known good failures still count. */
  watchSeconds?: number;
  /** A Prometheus query run on a schedule while the release is watched (an analysis check). */
  prometheus?: PrometheusCheck;
}

/**
 * A query against a Prometheus the user runs: it fails when its value (the largest sample of
 * an instant vector, or a scalar) is above maxValue; failureLimit failures in a row trip the
 * revert. An empty result or an unreachable server counts neither way.
 */
export interface PrometheusCheck {
  /** The server's base URL, e.g. http://prometheus.monitoring:9090. */
  url: string;
  /** PromQL, evaluated as an instant query. */
  query: string;
  maxValue: number;
  /** Failed checks in a row that trip the revert (default 3). */
  failureLimit?: number;
  /** How often (default 60). */
  intervalSeconds?: number;
}
export const DEFAULT_PROMETHEUS_FAILURE_LIMIT = 3;
export const DEFAULT_PROMETHEUS_INTERVAL_SECONDS = 60;

/** Default watch window: a week, the time a slow regression (a filesystem, a NIC driver) takes to show. */
export const DEFAULT_REVERT_WATCH_SECONDS = 7 * 24 * 3600;

export interface RevertRequest extends ReleaseRef {
  /** Why, in a person's words (shown in the condition and the Event). */
  reason?: string;
  by: string;
  at: Time;
}

/** A release known to be good: every machine promoted it and it passed its soak and gates. */
export interface KnownGood extends ReleaseRef {
  /** When cluster-operator recorded it as good. */
  since: Time;
}

/**
 * What this Cluster showed of one release it took (status.evidence; src/operator/status/evidence.ts):
 * read by `liken promote` from the clusters of a ring. Counts only grow; the soak is read as
 * (revertedAt or now) - firstProvenAt, never written (a field that changed each tick would
 * make a status write each tick).
 */
export interface ReleaseEvidence extends ReleaseRef {
  /** The most machines seen running it Ready at once (not Lost). */
  provenMachines: number;
  /** The most machines seen with a failed trial of it (failedReleases, lastTrial Failed). */
  failedTrials: number;
  /** When the first machine was seen running it Ready. */
  firstProvenAt?: Time;
  /** When provenMachines last grew. */
  lastProvenAt?: Time;
  /** When this Cluster reverted away from it (status.revokedReleases). */
  revertedAt?: Time;
  /** When the operator first saw the channel recall it. */
  recalledAt?: Time;
}

/** A release this Cluster must not take again, until a person clears it. */
export interface RevokedRelease extends ReleaseRef {
  /** CamelCase: the Reverted condition's reason (REVERT_REASONS), e.g. RevertedOnHealthGate. */
  reason: string;
  message?: string;
  at: Time;
}
export const REVOKED_RELEASES_MAX_ITEMS = 64;

export const REVERT_TRIGGERS = ["Request", "Automatic"] as const;
export type RevertTrigger = (typeof REVERT_TRIGGERS)[number];

/** The revert in force: while spec.version names `from`, the fleet's target is `to`. */
export interface RevertRecord {
  from: ReleaseRef;
  to: ReleaseRef;
  trigger: RevertTrigger;
  /** What tripped it: the request's reason, or the failures that reached the threshold. */
  message: string;
  /**
   * The Reverted condition's reason it was decided with (absent on records written before
   * it was kept: the trigger tells RevertedByRequest from RevertedAutomatically).
   */
  reason?: RevertReason;
  /**
   * The gate that tripped an automatic revert (revert.ts gateOf): a post-promotion health
   * gate's name (`command nic-ping`, `pods ns/selector`), `prometheus`, or `trial <reason>`.
   */
  gate?: string;
  /** Who: the person of the request, or the operator copy that decided it. */
  by: string;
  at: Time;
}

export interface CanarySpec {
  /** How many machines try a new release first (workers; leaders only without workers). */
  machines: number;
  /** When set, the pause ends by itself once the canaries stayed Ready this long. */
  soakSeconds?: number;
}

export interface CanaryContinue extends ReleaseRef {
  by: string;
  at: Time;
}

/**
 * A person allowed more trials of a release that hit the failure brake: the failures counted
 * when they did so no longer count (for exactly this release).
 */
export interface FailedReleaseResume {
  version: string;
  digest: string;
  /** The machines whose trial had failed when the person resumed; they no longer count. */
  machines: string[];
  by: string;
  at: Time;
}

export const CLUSTER_PHASES = ["Pending", "Updating", "Ready"] as const;
/**
 * Pending: no target version or no machines yet. Updating: a machine runs another version
 * than spec.version, or a reboot turn is held. Ready: every machine runs spec.version.
 */
export type ClusterPhase = (typeof CLUSTER_PHASES)[number];

/**
 * One reboot turn, recorded by cluster-operator with a write conditioned on the Cluster's
 * resourceVersion BEFORE the machine may act on it. The machine acts only on a record it
 * sees here; the record counts against the budget until the operator removes it.
 */
export interface RebootTurn {
  /** The Machine's name (list key: one record per machine). */
  machine: string;
  grantedAt: Time;
  /** Which operator copy granted it (its identity, e.g. pod name + process uid). */
  grantedBy: string;
  /**
   * Whether the machine was a leader when granted: the one-leader-down rule reads this,
   * not the Machine's current role, so a role edit mid-turn cannot let two leaders down.
   */
  leader: boolean;
  /** The release the turn is for; a retargeted machine does not reuse an older turn. */
  version: string;
  digest?: string;
  /** After this time a machine that has not come back stalls the rollout. */
  deadline?: Time;
  /** Set when the turn passed its deadline; Progressing is False/RolloutStalled meanwhile. */
  stalledAt?: Time;
  /**
   * When cluster-operator first saw the machine back on the turn's release and Ready; the
   * turn is released once it stayed Ready spec.rollout.soakSeconds from then.
   */
  returnedAt?: Time;
  /**
   * The machine's status.lastTrial.at when the turn was granted, when that trial was of the
   * turn's release ("" when it showed none): a trial carrying this stamp is an earlier one,
   * not this turn's. Copied and compared as text, never as a time: the agent wrote it on its
   * own clock. Absent only on records granted by an operator before this field.
   */
  priorTrialAt?: string;
  /**
   * Set while the turn may not begin its drain: after the grant another machine went down (a
   * Lost mark, a leader) and the budget or the leader rule is full, but the machine said it
   * started, so the turn is not simply taken back (it may be past its drain already). An agent
   * that has not begun its drain waits and says so (step UpdatePending), after which the turn
   * is judged as one not started; one that began goes on (src/operator/turns/paused.ts).
   */
  drainPause?: DrainPause;
}

/** Why and since when a granted turn may not begin its drain (RebootTurn.drainPause). */
export interface DrainPause {
  since: Time;
  message: string;
}

/** A turn taken back before its machine acted on it, kept until the machine says so. */
export interface TakenBackTurn extends Pick<
  RebootTurn,
  "machine" | "grantedAt" | "leader" | "version" | "digest" | "priorTrialAt"
> {
  /** When the operator took it back (its clock). */
  takenBackAt: Time;
}

/**
 * A machine's word on a turn taken back from it (Machine status.turnTakenBack): it saw the
 * record with this grantedAt in the Cluster's status.takenBackTurns, it is not disrupted (no
 * drain begun, or its drain undone), and it will not act on that grant. The operator then
 * drops the record and the machine asks again.
 */
export interface TurnTakenBackSeen {
  grantedAt: Time;
}

export const CLUSTER_CONDITION_TYPES = [
  "Progressing",
  "ChannelReachable",
  /** Channel trust modes: whether the signed channel's metadata was verified (TRUST_REASONS). */
  "ChannelTrusted",
  "SpecValid",
  /** True: the API server refused the last status write (422); see STATUS_WRITE_REASONS. */
  "StatusWriteRefused",
  /** A revert: in force (True), refused or ended (False); see REVERT_REASONS. */
  "Reverted",
] as const;
export type ClusterConditionType = (typeof CLUSTER_CONDITION_TYPES)[number];

/** Reasons of the Progressing condition. */
export const PROGRESSING_REASONS = [
  /** True: machines are moving to spec.version. */
  "RolloutProgressing",
  /** True: every machine runs spec.version. */
  "RolloutComplete",
  /** True: the operator just started and grants no turn until the time in the message. */
  "StartupGrace",
  /** True: machines wait for `liken approve-reboot` (rebootPolicy Manual). */
  "WaitingForApproval",
  /** False: a machine holding a turn did not come back; no more turns until examined. */
  "RolloutStalled",
  /** False: spec.version is unset; nothing to roll out. */
  "NoTarget",
  /** False: spec.rollout.maxFailedTrials machines failed their trial of spec.version. */
  "ReleaseFailed",
  /** True: no maintenance window is open; the message gives the next opening. */
  "OutsideMaintenanceWindow",
  /** True: the canary machines are back and Ready; `liken rollout continue` goes on. */
  "CanaryPaused",
  /**
   * True: no machine proved spec.version yet, and as many machines try it as
   * spec.rollout.maxFailedTrials allows to fail; the others wait for their trials.
   */
  "AwaitingFirstTrial",
  /** True: spec.rollout.paused; no new turn for anything until `liken rollout resume CLUSTER`. */
  "RolloutPaused",
  /**
   * False: spec.version names a release in status.revokedReleases and no revert is in force
   * for it; nothing moves until spec.version changes or a person clears the release.
   */
  "ReleaseRevoked",
] as const;
export type ProgressingReason = (typeof PROGRESSING_REASONS)[number];

export const CHANNEL_REASONS = ["ChannelRead", "ChannelUnreachable", "ChannelMalformed"] as const;
export type ChannelReason = (typeof CHANNEL_REASONS)[number];

/** What the TUF client (verify/tuf.ts) refuses a channel's metadata for: ChannelTrusted=False. */
export const TRUST_FAULTS = [
  /** The channel's 1.root.json is not the root whose sha256 the Cluster pins. */
  "RootPinMismatch",
  /** A role's metadata expired (or this operator's clock is far ahead). */
  "MetadataExpired",
  /** A role's version is lower than one already trusted: a replayed or rolled-back file. */
  "MetadataRollback",
  /** A new root does not follow the trusted one (skips a version, or is not signed by both). */
  "RootRotationInvalid",
  /** Fewer valid signatures than the role's threshold (an unknown or revoked key, too few keys). */
  "SignatureThreshold",
  /** A file's length or sha256 is not what the signed metadata says. */
  "LengthOrHashMismatch",
  /** A version the channel named before now has another digest. */
  "DigestChanged",
  /** This operator's clock reads earlier than when it last trusted the channel. */
  "ClockBehind",
  /** The channel's files could not be fetched. */
  "ChannelUnreachable",
  /** Metadata that is not valid TUF, or a target that is not a liken release document. */
  "MetadataInvalid",
] as const;

/**
 * Reasons of ChannelTrusted: True MetadataVerified; False one of the TUF client's faults, or
 * CatalogDisagrees (channel+pinned), NotInChannel (spec.version is not a release of the
 * channel), ReleaseRecalled (the channel recalled the target).
 */
export const TRUST_REASONS = [
  "MetadataVerified",
  ...TRUST_FAULTS,
  "CatalogDisagrees",
  "NotInChannel",
  "ReleaseRecalled",
] as const;
export type TrustReason = (typeof TRUST_REASONS)[number];

/** Reasons of SpecValid: what the API server cannot check (an unknown time zone). */
export const SPEC_VALID_REASONS = ["SpecAccepted", "UnknownTimeZone"] as const;
export type SpecValidReason = (typeof SPEC_VALID_REASONS)[number];

/**
 * The reason of StatusWriteRefused (both kinds): the API server refused a status write as
 * Invalid (422), most likely a field over the bound of the CRD installed in the cluster (an
 * older or edited CRD). The message names the fields and the server's words.
 */
export const STATUS_WRITE_REASONS = ["StatusInvalid"] as const;
export type StatusWriteReason = (typeof STATUS_WRITE_REASONS)[number];

/** Reasons of the Reverted condition (docs/revert.md). */
export const REVERT_REASONS = [
  /** True: a revert asked for by spec.rollout.revertRequest is in force. */
  "RevertedByRequest",
  /**
   * True: spec.rollout.revert's threshold was reached by a mix of failed trials and failed
   * post-promotion health; the revert is in force.
   */
  "RevertedAutomatically",
  /** True: failed trials of the release reached spec.rollout.revert's threshold. */
  "RevertedOnFailedTrials",
  /** True: failed post-promotion health gates reached the threshold (status.revert.gate names it). */
  "RevertedOnHealthGate",
  /** True: spec.rollout.revert.prometheus failed failureLimit times in a row. */
  "RevertedOnPrometheusQuery",
  /** False: the revert would go below the floor the release declares (release.yaml revertFloor). */
  "RevertBelowFloor",
  /** False: the floor could not be read yet (release.yaml unreachable or malformed). */
  "RevertFloorUnread",
  /** False: there is no last known good release other than the one to leave. */
  "NoKnownGood",
  /** False: the request names another release than spec.version's. */
  "RevertRequestStale",
  /** False: spec.version moved on; the revert no longer applies. */
  "RevertSuperseded",
  /**
   * False: a revert is recorded but cannot go on now (the channel's trust was refused or
   * expired, or its target was recalled or revoked and no other proven release is left); the
   * message names the releases, the rule and what to do. It goes on once that is lifted.
   */
  "RevertHeld",
] as const;
export type RevertReason = (typeof REVERT_REASONS)[number];

export type ClusterCondition =
  | Condition<"Progressing", ProgressingReason>
  | Condition<"Reverted", RevertReason>
  | Condition<"ChannelReachable", ChannelReason>
  | Condition<"ChannelTrusted", TrustReason>
  | Condition<"SpecValid", SpecValidReason>
  | Condition<"StatusWriteRefused", StatusWriteReason>;

export interface ClusterStatus {
  observedGeneration?: number;
  phase?: ClusterPhase;
  /** "ready/total" for the MACHINES column, e.g. "4/5". */
  machines?: string;
  counts?: {
    total: number;
    /** Running spec.version with step Ready. */
    ready: number;
    /** Not serving: holding a turn, Lost, or otherwise down; counts against the budget. */
    unavailable: number;
    lost: number;
  };
  /** The oldest version a machine runs (VERSION column). */
  version?: string;
  /** The newest version a machine runs (NEWEST column). */
  newest?: string;
  /** The newest version the channel announces. */
  available?: string;
  /**
   * The AVAILABLE column: `available`, marked "(failed on MACHINE)" when a machine of this
   * Cluster failed it, or "(revoked)" when a revert revoked it (src/operator/status/available.ts).
   */
  availableText?: string;
  /** Names of the leader machines (LEADERS column prints them as a JSON list). */
  leaders?: string[];
  /** The cluster's API endpoint (ENDPOINT column). */
  endpoint?: string;
  rebootTurns?: RebootTurn[];
  /**
   * Turns taken back (Overtaken) whose machine has not yet said it did not start them: each
   * counts against the budget and the leader rule until the Machine's status acknowledges it
   * (status.turnTakenBack names its grantedAt), since its agent may have begun a drain that its
   * status never showed (a write lost, a view behind). Never a licence to act.
   */
  takenBackTurns?: TakenBackTurn[];
  /** The machines holding a turn, comma-separated, for the TURNS column of `-o wide`. */
  turns?: string;
  /**
   * The STATUS column: the phase, or while the rollout is held, why (ReleaseFailed,
   * OutsideMaintenanceWindow, RolloutStalled).
   */
  display?: string;
  /** The canary of the current target (spec.rollout.canary): who, and when it passed. */
  canary?: CanaryStatus;
  /** Machines whose drain for the target timed out and gave their turn back (onDrainTimeout Skip). */
  drainSkipped?: DrainSkipped[];
  /** Where each downloading machine fetches from while spec.peers is on (docs/peers.md). */
  peerSources?: PeerSource[];
  /** The last release every machine promoted, that passed its soak and gates (LKG column). */
  lastKnownGood?: KnownGood;
  /** The last known good before lastKnownGood: where a revert of lastKnownGood itself goes. */
  priorKnownGood?: KnownGood;
  /** Releases this Cluster must not take again (reverted), newest last. */
  revokedReleases?: RevokedRelease[];
  /** The revert in force, or the last one (kept for `liken status` until spec.version moves). */
  revert?: RevertRecord;
  /** What this Cluster showed of each release it took, newest last (EVIDENCE_MAX_ITEMS). */
  evidence?: ReleaseEvidence[];
  /** The EVIDENCE column of -o wide: the newest entry of `evidence`, in a few words. */
  evidenceText?: string;
  channel?: {
    /** The last liken.sh/check-releases value the operator acted on. */
    handledCheckReleases?: string;
    /** When the operator last tried to read the channel. */
    lastCheckTime?: Time;
    /** When the operator last read the channel successfully. */
    lastSuccessTime?: Time;
  };
  /** What the signed channel vouches for, and the metadata trusted so far (channel modes). */
  trust?: TrustStatus;
  conditions?: ClusterCondition[];
}

export const TRUST_RECALLS_MAX_ITEMS = 16;
/** status.evidence holds this many releases; the oldest leaves first. */
export const EVIDENCE_MAX_ITEMS = 16;

/** The signed evidence of the target, summed (src/verify/evidence.ts): what requireEvidence reads. */
export interface SignedEvidenceSummary {
  /** The channel the evidence came from (the ring before). */
  from: string;
  clusters: number;
  machines: number;
  failedTrials: number;
  /** The least soak among the clusters, in seconds, when it was signed. */
  soakSeconds: number;
  promotedAt: Time;
}

export interface TrustStatus {
  /** The mode the status was made under (TRUST column of -o wide). */
  mode: TrustMode;
  /** The pin the trusted metadata started from; another pin in the spec starts anew. */
  rootDigest?: string;
  /** The release the channel vouches for now: the target of the channel modes. */
  target?: ReleaseRef;
  /**
   * The newest release this Cluster ever took from the channel; never cleared (a refusal or a
   * recall takes `target` away, not this): following never goes below it.
   */
  taken?: ReleaseRef;
  /** The newest release of the channel (recalled ones left out). */
  newest?: ReleaseRef;
  /** The signed evidence the target carries (`liken promote`), summed; none when it has none. */
  evidence?: SignedEvidenceSummary;
  /** When this Cluster's wave opens for the newest release (follow). */
  waveOpensAt?: Time;
  /** A release the channel recalled that this Cluster took or would take. */
  recalled?: { version: string; reason: string };
  /**
   * The releases the channel recalled, newest last, at most TRUST_RECALLS_MAX_ITEMS: no turn
   * goes to any of them, a revert included (src/release-decision/decide.ts).
   */
  recalls?: { version: string; digest: string; reason?: string }[];
  /** When the metadata was last verified (the operator's clock). */
  verifiedAt?: Time;
  /** When the first of the trusted roles expires, and which. */
  expiresAt?: Time;
  expiresRole?: string;
  /** FRESHNESS column: "fresh", "expired (accepted)", "stale: <reason>". */
  freshness?: string;
  /** The trusted TUF metadata, each file's JSON text: the client's persisted state. */
  metadata?: { root?: string; timestamp?: string; snapshot?: string; targets?: string };
}

export interface DrainSkipped {
  machine: string;
  at: Time;
  pod?: string;
  podDisruptionBudget?: string;
}

export interface CanaryStatus extends ReleaseRef {
  /** The machines granted the first turns of this release. */
  machines: string[];
  /** When every canary machine was first seen back on the release and Ready. */
  readyAt?: Time;
  /** When the canary passed (continued by a person, or its soak ended). */
  passedAt?: Time;
}

export interface Cluster {
  apiVersion: typeof API_VERSION;
  kind: typeof CLUSTER_KIND;
  metadata: ObjectMeta;
  spec: ClusterSpec;
  status?: ClusterStatus;
}

// ---------------------------------------------------------------------------------------
// Machine

export const ROLES = ["Worker", "Leader"] as const;
/** Leader: runs a member of the datastore (only one leader is ever down at a time). */
export type Role = (typeof ROLES)[number];

export const REBOOT_POLICIES = ["Manual", "Auto"] as const;
/** Manual (default): wait in RebootPending for `liken approve-reboot`. Auto: ask for a turn. */
export type RebootPolicy = (typeof REBOOT_POLICIES)[number];

/** Set by `liken approve-reboot`; approves exactly this release, never a later target. */
export interface Approval {
  version: string;
  /** When set, the approval holds only for a staged release with this digest. */
  digest?: string;
  /** Who approved (the Kubernetes user that ran the command). */
  by: string;
  at: Time;
}

/** Set by `liken rollout resume` after a person examined a stalled machine. */
export interface Resume {
  /** The grantedAt of the stalled turn this releases; a later turn is not released by it. */
  turnGrantedAt: Time;
  by: string;
  at: Time;
  reason: string;
}

/**
 * A person holds the machine at the release it runs (`liken machine hold`): it downloads and
 * asks for nothing, is skipped by the rollout and counted apart in the Cluster's MACHINES, until
 * `liken machine unhold` removes this. A download or a drain it began is undone; a trial boot
 * under way finishes.
 */
export interface MachineHold {
  /** The release it runs when held, for the record (the hold is of the machine, not a version). */
  version?: string;
  by: string;
  at: Time;
  reason?: string;
}

export interface MachineSpec {
  /** The Cluster this machine belongs to. Immutable. */
  cluster: string;
  /** The Kubernetes Node this machine runs as (what the agent cordons and drains). Immutable. */
  nodeName: string;
  role?: Role;
  rebootPolicy?: RebootPolicy;
  approval?: Approval;
  resume?: Resume;
  hold?: MachineHold;
}

export const MACHINE_STEPS = [
  /** Runs the target (or there is none); nothing to do. */
  "Ready",
  /** Writes the target release into the slot it does not run from. Still serving. */
  "Downloading",
  /** Staged; waits for a reboot turn (Auto, or Manual and approved). */
  "UpdatePending",
  /** Staged; rebootPolicy Manual and no approval for this release yet. */
  "RebootPending",
  /** Holds a turn: drains, checks the slot, reboots into it, proves the release. */
  "Updating",
  /**
   * The target release failed here (verification, or a trial that fell back); the machine
   * runs its old release and will not retry this digest until the target changes or a
   * person asks. See lastTrial, failedReleases and conditions.
   */
  "Failed",
  /** Written by cluster-operator: no heartbeat for 40 s. Counts against the budget. */
  "Lost",
] as const;
export type MachineStep = (typeof MACHINE_STEPS)[number];
/** The steps an agent reports; Lost is the operator's word about a silent agent. */
export type AgentStep = Exclude<MachineStep, "Lost">;

export const UPDATE_STAGES = [
  "Draining",
  "CheckingSlot",
  "Rebooting",
  "Proving",
  /** Back on the old slot with no promotion: the turn is kept until its Node rejoins. */
  "Rejoining",
] as const;
/** Where in the Updating step the machine is (for a stall message: "the step it was in"). */
export type UpdateStage = (typeof UPDATE_STAGES)[number];

export const SLOT_NAMES = ["a", "b"] as const;
export type SlotName = (typeof SLOT_NAMES)[number];

export const SLOT_STATES = [
  /** Holds nothing bootable. */
  "Empty",
  /** A download writes into it; not bootable. */
  "Writing",
  /** A release was staged here and then withdrawn (retarget); not bootable. */
  "Withdrawn",
  /** Holds a fully verified release, staged for the next trial. */
  "Staged",
  /** Armed for (or booted as) the boot-once trial. */
  "Trial",
  /** The slot the machine runs from and boots by default. */
  "Active",
  /** Holds the previous good release; the fallback. */
  "Inactive",
  /** Its release failed verification or its trial; never booted again as it is. */
  "Bad",
] as const;
export type SlotState = (typeof SLOT_STATES)[number];

export interface SlotStatus {
  name: SlotName;
  state: SlotState;
  version?: string;
  digest?: string;
}

export interface PeerSource {
  machine: string;
  /** The release these sources are for: an assignment for another release is not used. */
  digest: string;
  /** Peer server URLs, the main source first, then spares; the channel always comes last. */
  peers: string[];
}

export interface PeerServing {
  /** The peer server's base URL, e.g. http://10.0.0.7:7450/ */
  url: string;
  /** The releases it serves, at most one per slot. */
  releases: ReleaseRef[];
}

export interface StagedRelease extends ReleaseRef {
  slot: SlotName;
  at: Time;
}

export const TRIAL_RESULTS = ["Succeeded", "Failed", "Skipped", "Inconclusive"] as const;
/**
 * Succeeded: booted, rejoined, promoted. Failed: the bootloader fell back. Skipped: the
 * pre-trial slot check did not match the staged release; rebooted without the trial.
 * Inconclusive: the trial boot fell back without a verdict on the release (it could not read
 * the API server or its Node for the whole prove deadline, or the target changed meanwhile):
 * not remembered as failed, not counted by the failure brake, tried again.
 */
export type TrialResult = (typeof TRIAL_RESULTS)[number];

export interface TrialRecord extends ReleaseRef {
  slot: SlotName;
  result: TrialResult;
  at: Time;
  /** CamelCase, e.g. TrialDidNotRejoin, SlotCheckMismatch, Promoted. */
  reason: string;
  message?: string;
}

/**
 * The health gates (spec.health) run again after promotion, within spec.rollout.revert's watch
 * window: the last run's verdict, naming the boot and release it judged (fresh evidence). A
 * Failed verdict counts towards the automatic revert's threshold like a failed trial.
 */
export interface PostPromotionHealth extends ReleaseRef {
  /** The boot the gates ran on (/proc/sys/kernel/random/boot_id). */
  bootID: string;
  result: "Passed" | "Failed";
  /** The gate that failed, e.g. a health command's name (Failed only). */
  gate?: string;
  at: Time;
  message?: string;
}

/** A release this machine must not retry (the brupop#123 crash loop). */
export interface FailedRelease extends ReleaseRef {
  at: Time;
  reason: string;
}

/** Why the drain cannot go on: which pod, held by which PodDisruptionBudget, since when. */
export interface DrainBlocker {
  /** "namespace/name" of the pod the eviction refused. */
  pod: string;
  /** "namespace/name" of the PodDisruptionBudget, when the refusal names one. */
  podDisruptionBudget?: string;
  since: Time;
  message: string;
}

/**
 * The machine's drain for a turn did not finish within spec.disruption.drainTimeoutSeconds and
 * spec.disruption.onDrainTimeout is Skip: it uncordoned and gave that turn back.
 */
export interface DrainTimedOut extends ReleaseRef {
  /** The grantedAt of the turn it gave back. */
  turnGrantedAt: Time;
  at: Time;
  /** "namespace/name" of the pod that held the drain, and its PodDisruptionBudget. */
  pod?: string;
  podDisruptionBudget?: string;
  message: string;
}

export interface DownloadProgress {
  bytesDone: number;
  bytesTotal: number;
  /** floor(100 * bytesDone / bytesTotal), for the PROGRESS column. */
  percent: number;
  /** The artifact being written. */
  artifact?: string;
  /** Adaptive downloads: bytes copied from the machine's own disks (checked chunk by chunk). */
  bytesReused?: number;
  /** Bytes received from the channel so far (artifacts and chunk indexes). */
  bytesFetched?: number;
  /**
   * Indexing: the running slot is read once to learn what it holds, since its release left no
   * chunk index (docs/agent.md, "The first update"); absent while the download writes.
   */
  stage?: DownloadStage;
  /** floor(100 * bytes indexed / bytes to index), while stage is set. */
  stagePercent?: number;
}

export const DOWNLOAD_STAGES = ["Indexing"] as const;
export type DownloadStage = (typeof DOWNLOAD_STAGES)[number];

/** The machine's request for a reboot turn, for the release it staged. */
export interface TurnRequest extends ReleaseRef {
  at: Time;
}

export const MACHINE_CONDITION_TYPES = [
  /** True while the agent's heartbeat Lease is fresh (written by cluster-operator). */
  "Alive",
  /** True when the machine runs the Cluster's spec.version. */
  "UpToDate",
  /** True when a verified release is staged in the inactive slot. */
  "ReleaseStaged",
  /** True while an eviction is refused; see status.drainBlocker. */
  "DrainBlocked",
  /**
   * The last trial: True Succeeded, False when it fell back or was skipped, Unknown when it
   * fell back without a verdict (Inconclusive).
   */
  "TrialSucceeded",
  /**
   * True while the last trial of the target ended without a verdict on the release (reason
   * TrialNotArmed: the bootloader was never shown armed); the release is not counted as failed.
   */
  "TrialInconclusive",
  /** True: the API server refused the agent's last full status write (422 Invalid). */
  "StatusWriteRefused",
  /**
   * The agent's client certificate: True Joined / Renewed / Rejoined (bootstrapped again
   * after it expired) / Provided (made by hand); False ExpiresSoon.
   */
  "IdentityCurrent",
] as const;
export type MachineConditionType = (typeof MACHINE_CONDITION_TYPES)[number];
export type MachineCondition = Condition<MachineConditionType>;

export interface MachineStatus {
  observedGeneration?: number;
  /** The release running now (LIKEN column). */
  version?: string;
  digest?: string;
  step?: MachineStep;
  updateStage?: UpdateStage;
  /** The Cluster target the agent works towards, as it last read it. */
  target?: ReleaseRef;
  bootedSlot?: SlotName;
  /** The boot the agent reports from; evidence needs the Node to name the same one. */
  bootId?: string;
  slots?: SlotStatus[];
  staged?: StagedRelease;
  progress?: DownloadProgress;
  turnRequest?: TurnRequest;
  /** The last turn taken back from it that it saw and did not act on (TurnTakenBackSeen). */
  turnTakenBack?: TurnTakenBackSeen;
  lastTrial?: TrialRecord;
  failedReleases?: FailedRelease[];
  /** The last post-promotion run of the health gates (see PostPromotionHealth). */
  postPromotionHealth?: PostPromotionHealth;
  drainBlocker?: DrainBlocker;
  drainTimedOut?: DrainTimedOut;
  /** Pods of the Cluster's spec.disruption.blockingPods on its node, while they hold its turn. */
  blockingPods?: string[];
  /** Where this machine serves verified chunks to its peers, and what (docs/peers.md). */
  peers?: PeerServing;
  /** The notAfter of the client certificate the agent authenticates with (Cert-Expires). */
  certificateExpiry?: Time;
  /**
   * "sha256:<hex>" of that certificate's public key (its SubjectPublicKeyInfo): the key that
   * proves the machine when it joins again after a CA rotation (src/api/rejoin-proof.ts).
   */
  certificateKeyDigest?: string;
  /** Where the role and reboot policy the agent registered the Machine with came from (Role-From). */
  registration?: Registration;
  /** When the agent last wrote this status; the live heartbeat is its Lease. */
  lastHeartbeatTime?: Time;
  conditions?: MachineCondition[];
}

/**
 * Where a registered Machine's spec.role and spec.rebootPolicy came from: agent.yaml
 * (AgentConfig), its Node's node-role.kubernetes.io/control-plane label or its absence
 * (NodeLabel), or the default because the Node could not be read when the agent registered
 * (Default: Worker, Manual).
 */
export const ROLE_SOURCES = ["AgentConfig", "NodeLabel", "Default"] as const;
export type RoleSource = (typeof ROLE_SOURCES)[number];
export const POLICY_SOURCES = ["AgentConfig", "Default"] as const;
export type PolicySource = (typeof POLICY_SOURCES)[number];

export interface Registration {
  roleFrom: RoleSource;
  rebootPolicyFrom: PolicySource;
  /** When the agent registered the Machine. */
  at: Time;
}

export interface Machine {
  apiVersion: typeof API_VERSION;
  kind: typeof MACHINE_KIND;
  metadata: ObjectMeta;
  spec: MachineSpec;
  status?: MachineStatus;
}

export type LikenObject = Cluster | Machine;
