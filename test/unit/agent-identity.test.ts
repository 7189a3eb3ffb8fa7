// The agent's identity: when it renews (the kubelet's 70-90 % window, counted from when the
// machine received the certificate), what the Machine says about it, and the files it keeps
// (real files in a temporary directory: the pem swap, the mode, the kubeconfig).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  identityCondition,
  renewAtMs,
  WARN_BEFORE_MS,
  type CertTimes,
} from "../../src/agent/identity/renewal.js";
import {
  CURRENT,
  installIssued,
  pruneIssued,
  readHeld,
  writeKubeconfig,
} from "../../src/agent/identity/files.js";
import { loadRestConfig } from "../../src/api/rest.js";
import { parseAgentSection } from "../../src/agent/config.js";
import type { AgentSlotsConfig } from "../../src/slots/config.js";

const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const T0 = Date.parse("2026-12-04T10:00:00Z");

describe("renewAtMs: 70 % to 90 % of the lifetime, from when the machine got it", () => {
  const year: CertTimes = { notBeforeMs: T0, notAfterMs: T0 + 365 * DAY, issuedMs: T0 };
  it.each<[string, CertTimes, number, number]>([
    ["no jitter: 70 %", year, 0, T0 + Math.floor(365 * DAY * 0.7)],
    ["full jitter: 90 %", year, 1, T0 + Math.floor(365 * DAY * 0.9)],
    ["half: 80 %", year, 0.5, T0 + Math.floor(365 * DAY * 0.8)],
    // The signer backdates notBefore 5 minutes: a 90 s certificate counts from its arrival.
    [
      "backdated notBefore",
      { notBeforeMs: T0 - 5 * MIN, notAfterMs: T0 + 90_000, issuedMs: T0 },
      0,
      T0 + 63_000,
    ],
    ["jitter out of range is clamped", year, 7, T0 + Math.floor(365 * DAY * 0.9)],
  ])("%s", (_, c, jitter, want) => {
    // Within a millisecond: 0.7 + 0.2 × 1 is 0.8999… in binary floating point.
    expect(Math.abs(renewAtMs(c, jitter) - want)).toBeLessThanOrEqual(1);
  });
});

describe("identityCondition: IdentityCurrent on the Machine", () => {
  const year: CertTimes = { notBeforeMs: T0, notAfterMs: T0 + 365 * DAY, issuedMs: T0 };
  const short: CertTimes = { notBeforeMs: T0, notAfterMs: T0 + 100_000, issuedMs: T0 };
  it.each<[string, CertTimes, number, string, string]>([
    ["fresh", year, T0 + DAY, "True", "Joined"],
    ["31 days before the end of a year", year, T0 + 334 * DAY, "True", "Joined"],
    [
      "30 days before the end of a year: warns",
      year,
      T0 + 365 * DAY - WARN_BEFORE_MS,
      "False",
      "ExpiresSoon",
    ],
    ["a 100 s certificate at 85 s: still fine", short, T0 + 85_000, "True", "Joined"],
    ["a 100 s certificate in its last tenth", short, T0 + 91_000, "False", "ExpiresSoon"],
    ["expired", year, T0 + 400 * DAY, "False", "ExpiresSoon"],
  ])("%s", (_, c, now, status, reason) => {
    expect(identityCondition(c, "Joined", now)).toMatchObject({
      type: "IdentityCurrent",
      status,
      reason,
    });
  });
  it("says a rejoin after an expiry", () => {
    expect(identityCondition(year, "Rejoined", T0).message).toMatch(
      /joined again with the bootstrap/,
    );
  });
});

describe("the identity's files", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "liken-identity-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function selfSigned(cn: string, days: number): { cert: string; key: string } {
    const key = path.join(dir, `${cn}.key`);
    const crt = path.join(dir, `${cn}.crt`);
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        key,
        "-out",
        crt,
        "-subj",
        `/CN=${cn}`,
        "-days",
        `${days}`,
      ],
      { stdio: "pipe" },
    );
    return { cert: readFileSync(crt, "utf8"), key: readFileSync(key, "utf8") };
  }

  it("installs certificate and key as one 0600 file behind the current symlink, keeps the previous one", () => {
    const a = selfSigned("a", 1);
    const b = selfSigned("b", 2);
    const c = selfSigned("c", 3);
    const first = installIssued(dir, a.cert, a.key, 1000);
    installIssued(dir, b.cert, b.key, 2000);
    const third = installIssued(dir, c.cert, c.key, 3000);
    pruneIssued(dir);
    expect(readlinkSync(path.join(dir, CURRENT))).toBe(path.basename(third));
    expect(statSync(third).mode & 0o777).toBe(0o600);
    const held = readHeld(dir)!;
    expect(held.subject).toBe("CN=c");
    expect(held.issuedMs).toBe(3000);
    expect(() => statSync(first)).toThrow();
    expect(statSync(path.join(dir, "liken-client-2000.pem")).isFile()).toBe(true);
    expect(readFileSync(third, "utf8")).toMatch(/BEGIN CERTIFICATE[\s\S]*BEGIN PRIVATE KEY/);
  });

  it("writes a kubeconfig the agent's client reads, certificate and key from the current pem", () => {
    const file = path.join(dir, "kubeconfig");
    writeKubeconfig(file, {
      server: "https://127.0.0.1:6443",
      caData: Buffer.from("ca").toString("base64"),
      user: "liken:machine:m1",
    });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const cfg = loadRestConfig(file);
    expect(cfg.server).toBe("https://127.0.0.1:6443");
    expect(cfg.cert?.toString()).toBe(readFileSync(path.join(dir, CURRENT), "utf8"));
    expect(cfg.key?.toString()).toBe(cfg.cert?.toString());
    expect(parse(readFileSync(file, "utf8")).users[0].user["client-key"]).toBe(
      path.join(dir, CURRENT),
    );
  });
});

describe("agent.yaml identity", () => {
  const slots = { cmdline: "/proc/cmdline" } as unknown as AgentSlotsConfig;
  const base = "machine: m1\ncluster: c\nbootloader: {backend: grub, envDir: /boot}\n";
  it("resolves the bootstrap kubeconfig and takes the defaults", () => {
    const cfg = parseAgentSection(
      `${base}kubeconfig: state/kubeconfig\nidentity: {bootstrapKubeconfig: boot.kubeconfig}\n`,
      "/etc/liken/agent.yaml",
      slots,
    );
    expect(cfg.identity).toEqual({
      kubeconfig: "/etc/liken/state/kubeconfig",
      bootstrapKubeconfig: "/etc/liken/boot.kubeconfig",
      expirationSeconds: 365 * 24 * 3600,
      approvalWarnMs: 120_000,
    });
  });
  it.each([
    [
      "without kubeconfig",
      `${base}identity: {bootstrapKubeconfig: b}\n`,
      /identity needs kubeconfig/,
    ],
    [
      "under the API's 600 s",
      `${base}kubeconfig: k\nidentity: {bootstrapKubeconfig: b, expirationSeconds: 60}\n`,
      /expirationSeconds/,
    ],
    [
      "an unknown field",
      `${base}kubeconfig: k\nidentity: {bootstrapKubeconfig: b, token: x}\n`,
      /token/,
    ],
  ])("refuses identity %s", (_, text, message) => {
    expect(() => parseAgentSection(text, "agent.yaml", slots)).toThrow(message);
  });
});
