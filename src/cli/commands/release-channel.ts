// `liken release sign ...`: the signing side of a signed channel (src/release/tuf.ts).
// init makes the root and keys, add publishes a built release as a target of a named channel,
// recall signs a recall, rotate replaces a role's keys, refresh re-signs snapshot and timestamp.
import { type Command, InvalidArgumentError } from "commander";
import { LikenError } from "../../errors.js";
import {
  addRelease,
  initChannel,
  recallRelease,
  refreshChannel,
  rotateKey,
  TUF_ROLES,
  type TufRoleName,
} from "../../release/tuf.js";

const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** "30d", "12h", "90m", "3600s", "3600" -> seconds. */
export function parseSeconds(text: string): number {
  const m = /^(\d+)(s|m|h|d)?$/.exec(text.trim());
  const unit = UNIT_S[m?.[2] ?? "s"];
  if (m === null || unit === undefined || Number(m[1]) <= 0) {
    throw new InvalidArgumentError(`"${text}" is not a duration such as 3600s, 12h or 30d`);
  }
  return Number(m[1]) * unit;
}

function parseRole(v: string): TufRoleName {
  if (!(TUF_ROLES as readonly string[]).includes(v)) {
    throw new InvalidArgumentError(`"${v}" is not a role (${TUF_ROLES.join(", ")})`);
  }
  return v as TufRoleName;
}

/** "targets=2/3": threshold 2 of 3 keys. */
function parseKeys(
  v: string,
  prev: Partial<Record<TufRoleName, { keys: number; threshold: number }>> = {},
): Partial<Record<TufRoleName, { keys: number; threshold: number }>> {
  const m = /^([a-z]+)=(\d+)\/(\d+)$/.exec(v);
  if (m === null) throw new InvalidArgumentError(`"${v}" is not ROLE=THRESHOLD/KEYS (root=2/3)`);
  return { ...prev, [parseRole(m[1]!)]: { threshold: Number(m[2]), keys: Number(m[3]) } };
}

/** "timestamp=1d": the expiry of a role's signatures. */
function parseExpiry(
  v: string,
  prev: Partial<Record<TufRoleName, number>> = {},
): Partial<Record<TufRoleName, number>> {
  const eq = v.indexOf("=");
  if (eq < 0) throw new InvalidArgumentError(`"${v}" is not ROLE=DURATION (timestamp=1d)`);
  return { ...prev, [parseRole(v.slice(0, eq))]: parseSeconds(v.slice(eq + 1)) };
}

export interface Dirs {
  repo: string;
  keys: string;
  expires?: Partial<Record<TufRoleName, number>>;
  rootKey?: string[];
  passphraseEnv?: string;
}

const collect = (v: string, prev: string[] = []): string[] => [...prev, v];

/** The passphrase from the environment variable named (never from the command line: ps shows it). */
function passphraseOf(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  const v = process.env[name];
  if (v === undefined || v === "") {
    throw new LikenError(
      "LIKEN_CHANNEL_NO_PASSPHRASE",
      `--passphrase-env ${name}: the environment variable ${name} is not set; set it (read -rs ${name}; export ${name}) and run again`,
    );
  }
  return v;
}

export function withDirs(c: Command): Command {
  return c
    .requiredOption("--repo <dir>", "the channel directory (what is served)")
    .requiredOption("--keys <dir>", "the private keys' directory (never served)")
    .option(
      "--root-key <dir>",
      "the directory of one root key (repeat once per root key, each on its own offline medium); default: --keys",
      collect,
    )
    .option(
      "--passphrase-env <var>",
      "encrypt the root keys written, and decrypt those read, with the passphrase in this environment variable",
    )
    .option(
      "--expires <role=duration>",
      "how long a role's new signature holds (repeatable; defaults root=365d targets=90d snapshot=7d timestamp=1d)",
      parseExpiry,
    );
}

export const signOpts = (o: Dirs) => {
  const passphrase = passphraseOf(o.passphraseEnv);
  return {
    repo: o.repo,
    keys: o.keys,
    ...(o.expires === undefined ? {} : { expires: o.expires }),
    ...(o.rootKey === undefined ? {} : { rootKeyDirs: o.rootKey }),
    ...(passphrase === undefined ? {} : { passphrase }),
    warn: (m: string) => process.stderr.write(`warning: ${m}\n`),
  };
};

export function registerReleaseChannel(release: Command): void {
  // "sign", not "channel": `liken channel serve` serves a channel, this signs one, and the two
  // names read alike. The old name stays an alias for a release (docs/releases.md).
  const channel = release
    .command("sign")
    .alias("channel")
    .description(
      "Sign a channel (TUF): init, add, recall, rotate, refresh (formerly `liken release channel`)",
    );

  withDirs(channel.command("init"))
    .description("Create the channel's root and keys; prints the root digest a Cluster pins")
    .option(
      "--threshold <role=n/keys>",
      "signatures needed and keys made for a role (repeatable, default 1/1 each)",
      parseKeys,
    )
    .action(async (o: Dirs & { threshold?: ReturnType<typeof parseKeys> }) => {
      const r = await initChannel({
        ...signOpts(o),
        ...(o.threshold === undefined ? {} : { roles: o.threshold }),
      });
      process.stdout.write(
        `${r.rootFile}\nrootDigest: ${r.rootDigest}\n(pin it in spec.releases.trust.rootDigest)\n`,
      );
    });

  withDirs(channel.command("add"))
    .description("Add the built release <repo>/<version>/ to a channel and re-sign")
    .requiredOption("--version <version>", "the release version (built with `liken release build`)")
    .option("--channel <name>", "the channel's name", "stable")
    .option(
      "--wave <duration>",
      "how long the release's waves take to open for every following Cluster",
      parseSeconds,
    )
    .action(async (o: Dirs & { version: string; channel: string; wave?: number }) => {
      const r = await addRelease({
        ...signOpts(o),
        channel: o.channel,
        version: o.version,
        ...(o.wave === undefined ? {} : { waveSeconds: o.wave }),
      });
      process.stdout.write(`${r.path} ${r.digest}\n`);
    });

  withDirs(channel.command("recall"))
    .description("Sign a recall of a release: following Clusters never take it")
    .requiredOption("--version <version>", "the release to recall")
    .requiredOption("--reason <text>", "why (shown on every Cluster that took it)")
    .option("--channel <name>", "the channel's name", "stable")
    .action(async (o: Dirs & { version: string; channel: string; reason: string }) => {
      await recallRelease({
        ...signOpts(o),
        channel: o.channel,
        version: o.version,
        reason: o.reason,
      });
      process.stdout.write(`recalled ${o.channel}/${o.version}\n`);
    });

  withDirs(channel.command("rotate"))
    .description(
      "Replace every key of a role (a new root version, signed by old and new root keys)",
    )
    .requiredOption("--role <role>", `the role (${TUF_ROLES.join(", ")})`, parseRole)
    .action(async (o: Dirs & { role: TufRoleName }) => {
      const r = await rotateKey({ ...signOpts(o), role: o.role });
      process.stdout.write(
        `root version ${r.rootVersion}; the old ${o.role} keys are in ${o.keys}/revoked\n`,
      );
    });

  withDirs(channel.command("refresh"))
    .description("Re-sign snapshot and timestamp with fresh expiries (run it from a timer)")
    .option("--targets", "re-sign the targets role too")
    .action(async (o: Dirs & { targets?: boolean }) => {
      await refreshChannel({ ...signOpts(o), targets: o.targets === true });
      process.stdout.write(
        `${o.targets === true ? "targets, " : ""}snapshot and timestamp re-signed\n`,
      );
    });
}
