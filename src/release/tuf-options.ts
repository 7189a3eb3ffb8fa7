// What every `liken release sign` command is told, and the names they share: the four roles,
// how long each role's signature holds, where the metadata and the keys live, and the one
// error they throw. Apart, so that the keys, the repository and the commands each import it
// without importing each other.
import path from "node:path";
import { LikenError } from "../errors.js";

export type TufRoleName = "root" | "targets" | "snapshot" | "timestamp";
export const TUF_ROLES: readonly TufRoleName[] = ["root", "targets", "snapshot", "timestamp"];

export class ChannelSignError extends LikenError {}

const DAY = 24 * 3600;
/**
 * How long each role's signature holds unless told otherwise. Root a year (it is signed
 * offline, rarely); targets 90 days (a release every few weeks re-signs it); snapshot a week
 * and timestamp a day: the freshness roles are re-signed by `liken release sign refresh`,
 * from a cron job, so a frozen mirror is noticed within a day (TUF spec, section 6.2; the
 * same shape as Bottlerocket's and Sigstore's repositories).
 */
export const DEFAULT_EXPIRY_SECONDS: Readonly<Record<TufRoleName, number>> = {
  root: 365 * DAY,
  targets: 90 * DAY,
  snapshot: 7 * DAY,
  timestamp: 1 * DAY,
};

export interface ChannelDirs {
  /** The channel directory (served); metadata goes to <repo>/tuf. */
  repo: string;
  /** Where the private keys are kept (never served). */
  keys: string;
}

export interface SignOptions extends ChannelDirs {
  now?: Date;
  expires?: Partial<Record<TufRoleName, number>>;
  /**
   * One directory per root key, each on its own medium, kept offline (docs/releases.md, "The
   * key ceremony"). Unset: the root keys live in `keys` with the others.
   */
  rootKeyDirs?: string[];
  /** Encrypts the root keys written (PKCS#8, AES-256-CBC) and decrypts those read. */
  passphrase?: string;
  /** Told what a person should know, such as root keys sharing a directory. */
  warn?: (message: string) => void;
}

export interface InitOptions extends SignOptions {
  /** How many keys each role has, and how many must sign (default 1 and 1). */
  roles?: Partial<Record<TufRoleName, { keys: number; threshold: number }>>;
}

export const SPEC_VERSION = "1.0.31";

export const tufDir = (repo: string): string => path.join(repo, "tuf");

export function expiry(o: SignOptions, role: TufRoleName): string {
  const now = o.now ?? new Date();
  const secs = o.expires?.[role] ?? DEFAULT_EXPIRY_SECONDS[role];
  return new Date(Math.floor(now.getTime() / 1000) * 1000 + secs * 1000)
    .toISOString()
    .replace(/\.\d{3}Z$/, "Z");
}
