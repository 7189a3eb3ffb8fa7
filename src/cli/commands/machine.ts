// `liken machine install <disk>` and `liken machine image <file>`: a disk (or a raw disk image
// to dd or PXE-boot) made into a liken machine from a release (src/install/). Options only; the
// installer does the work and logs each phase on stderr.
import { registerHold } from "./hold.js";
import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import { MACHINE_FROM, type MachineFrom } from "../../agent/machine-name.js";
import { REBOOT_POLICIES, ROLES, type RebootPolicy, type Role } from "../../api/types.js";
import { BOOTSTRAP_TOKEN } from "../../api/bootstrap-token.js";
import { InstallError } from "../../install/errors.js";
import {
  BOOTLOADERS,
  DEFAULT_KERNEL_ARGS,
  DEFAULT_TRIAL_ARGS,
  type InstallBootloader,
} from "../../install/esp.js";
import { DEFAULT_ESP_MIB, installMachine, type InstallOptions } from "../../install/install.js";
import { MiB } from "../../install/layout.js";
import type { ReleaseSource } from "../../install/release.js";
import { bootstrapKubeconfig } from "../../install/state.js";
import { parseSize } from "./size.js";

interface MachineFlags {
  release: string;
  releaseVersion?: string;
  digest?: string;
  bootloader: InstallBootloader;
  espSize: number;
  slotSize?: number;
  stateSize?: number;
  size?: number;
  cluster: string;
  machine?: string;
  machineFrom?: MachineFrom;
  role?: Role;
  rebootPolicy?: RebootPolicy;
  bootstrapKubeconfig?: string;
  apiServer?: string;
  ca?: string;
  bootstrapTokenFile?: string;
  kubeconfig?: string;
  kernelArgs: string;
  trialArgs: string;
  serialConsole: boolean;
  wipe: boolean;
  stateFile: string[];
}

function bad(message: string): InstallError {
  return new InstallError("LIKEN_INSTALL_BAD_INPUT", `${message}; nothing was written to the disk`);
}

function readInput(flag: string, file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    throw bad(`${flag} ${file}: ${(e as Error).message}`);
  }
}

/** --release: a release directory, or a channel URL with --release-version and --digest. */
export function releaseSource(
  f: Pick<MachineFlags, "release" | "releaseVersion" | "digest">,
): ReleaseSource {
  if (/^https?:\/\//.test(f.release)) {
    if (f.releaseVersion === undefined || f.digest === undefined)
      throw bad(
        `--release ${f.release} is a channel: give --release-version and --digest (the Cluster's catalog entry; \`liken release catalog-entry\` prints it)`,
      );
    return { channel: f.release, version: f.releaseVersion, digest: f.digest };
  }
  if (f.releaseVersion !== undefined)
    throw bad(
      "--release-version goes with a channel URL; a release directory names its own version",
    );
  return { dir: f.release, ...(f.digest === undefined ? {} : { digest: f.digest }) };
}

/** The credential the machine joins with: a bootstrap kubeconfig, or one made from its parts, or its own kubeconfig. */
export function credential(f: MachineFlags): InstallOptions["credential"] {
  const parts = [f.apiServer, f.ca, f.bootstrapTokenFile].filter((x) => x !== undefined).length;
  const kinds = [f.bootstrapKubeconfig !== undefined, parts > 0, f.kubeconfig !== undefined].filter(
    Boolean,
  ).length;
  if (kinds !== 1)
    throw bad(
      "give one credential: --bootstrap-kubeconfig FILE, or --api-server URL --ca FILE --bootstrap-token-file FILE, or --kubeconfig FILE (the machine's own)",
    );
  if (f.bootstrapKubeconfig !== undefined)
    return {
      kind: "bootstrap",
      kubeconfig: readInput("--bootstrap-kubeconfig", f.bootstrapKubeconfig),
    };
  if (f.kubeconfig !== undefined)
    return { kind: "kubeconfig", kubeconfig: readInput("--kubeconfig", f.kubeconfig) };
  if (parts !== 3) throw bad("--api-server, --ca and --bootstrap-token-file go together");
  const token = readInput("--bootstrap-token-file", f.bootstrapTokenFile!).trim();
  if (!BOOTSTRAP_TOKEN.test(token))
    throw bad(
      `--bootstrap-token-file ${f.bootstrapTokenFile}: not a bootstrap token (<6 of [a-z0-9]>.<16 of [a-z0-9]>; docs/machine.md, "Identity")`,
    );
  if (!/^https:\/\//.test(f.apiServer!))
    throw bad(`--api-server ${f.apiServer}: must be an https:// URL`);
  const caPem = readInput("--ca", f.ca!);
  if (!caPem.includes("BEGIN CERTIFICATE")) throw bad(`--ca ${f.ca}: not a PEM certificate`);
  return {
    kind: "bootstrap",
    kubeconfig: bootstrapKubeconfig({ server: f.apiServer!, caPem, token }),
  };
}

function mib(flag: string, n: number | undefined): number | undefined {
  if (n === undefined) return undefined;
  if (n % MiB !== 0 || n === 0) throw bad(`${flag}: ${n} bytes is not a whole number of MiB`);
  return n / MiB;
}

/** --state-file PATH=FILE: PATH on the state partition (relative, no ..) gets FILE's bytes. */
export function stateFiles(specs: string[]): Record<string, Buffer> {
  const out: Record<string, Buffer> = {};
  for (const spec of specs) {
    const m = /^([^=]+)=(.+)$/.exec(spec);
    const p = m?.[1]?.replace(/^\/+/, "");
    if (
      m === undefined ||
      m === null ||
      p === undefined ||
      p.split("/").some((x) => x === ".." || x === "" || x === ".")
    )
      throw bad(
        `--state-file ${spec}: write PATH=FILE, PATH relative to the state partition (e.g. node/kubelet-bootstrap.kubeconfig=./kubelet.kubeconfig)`,
      );
    if (/^(etc\/agent\.yaml|etc\/bootstrap-kubeconfig|etc\/kubeconfig|slot-[ab](\/.*)?)$/.test(p))
      throw bad(`--state-file ${spec}: ${p} is the installer's own`);
    try {
      out[p] = readFileSync(m[2]!);
    } catch (e) {
      throw bad(`--state-file ${spec}: ${(e as Error).message}`);
    }
  }
  return out;
}

export function installOptions(
  target: string,
  mode: "disk" | "image",
  f: MachineFlags,
): InstallOptions {
  const slotMiB = mib("--slot-size", f.slotSize);
  const stateMiB = mib("--state-size", f.stateSize);
  return {
    target,
    mode,
    ...(f.size === undefined ? {} : { imageBytes: f.size }),
    espMiB: mib("--esp-size", f.espSize)!,
    ...(slotMiB === undefined ? {} : { slotMiB }),
    ...(stateMiB === undefined ? {} : { stateMiB }),
    bootloader: f.bootloader,
    release: releaseSource(f),
    cluster: f.cluster,
    ...(f.machine === undefined ? {} : { machine: f.machine }),
    ...(f.machineFrom === undefined ? {} : { machineFrom: f.machineFrom }),
    ...(f.role === undefined ? {} : { role: f.role }),
    ...(f.rebootPolicy === undefined ? {} : { rebootPolicy: f.rebootPolicy }),
    credential: credential(f),
    ...(f.stateFile.length === 0 ? {} : { stateFiles: stateFiles(f.stateFile) }),
    kernelArgs: serialArgs(f.kernelArgs, f.serialConsole),
    trialArgs: f.trialArgs,
    serial: f.serialConsole,
    wipe: f.wipe,
    log: (line) => process.stderr.write(`liken machine: ${line}\n`),
  };
}

/**
 * With --serial-console the kernel's console is the serial port too (the last console= is
 * /dev/console): the kernel, systemd and liken-agent, whose unit writes its log to the journal
 * and the console (config/systemd/liken-agent.service), show there. A machine that never joins
 * still says why over the serial line (issue 50: the agent's log could not be read). Arguments
 * that name a console already are left as they are.
 */
export function serialArgs(args: string, serial: boolean): string {
  return serial && !/(^|\s)console=/.test(args)
    ? `${args} console=tty0 console=ttyS0,115200`
    : args;
}

function common(c: Command): Command {
  return c
    .requiredOption(
      "--release <dir|url>",
      "the release: its directory <channel>/<version>/, or a channel URL (with --release-version and --digest)",
    )
    .option("--release-version <version>", "with a channel URL: the release's version")
    .option(
      "--digest <sha256:...>",
      "the catalog digest of its release.yaml (required with a channel URL; checked against a directory)",
    )
    .addOption(
      new Option("--bootloader <name>", "the bootloader on the ESP")
        .choices(BOOTLOADERS)
        .default("grub"),
    )
    .option("--esp-size <size>", "the EFI system partition", parseSize, DEFAULT_ESP_MIB * MiB)
    .option("--slot-size <size>", "each of the two slots (default: twice the release)", parseSize)
    .option(
      "--state-size <size>",
      "the state partition (default: the rest of the disk; 256M in an image)",
      parseSize,
    )
    .requiredOption("--cluster <name>", "the Cluster the machine joins")
    .option(
      "--machine <name>",
      "the Machine's name (default: the machine's hostname, or its DMI serial, at the agent's start)",
    )
    .addOption(
      new Option(
        "--machine-from <source>",
        "without --machine: which name the agent tries first",
      ).choices(MACHINE_FROM),
    )
    .addOption(
      new Option(
        "--role <role>",
        "register the Machine with this role (default: Leader if its Node is a control-plane node)",
      ).choices(ROLES),
    )
    .addOption(
      new Option(
        "--reboot-policy <policy>",
        "register the Machine with this reboot policy (default Manual)",
      ).choices(REBOOT_POLICIES),
    )
    .option(
      "--bootstrap-kubeconfig <file>",
      "the fleet's bootstrap kubeconfig (docs/machine.md, Identity)",
    )
    .option(
      "--api-server <url>",
      "with --ca and --bootstrap-token-file: the bootstrap kubeconfig is made from them",
    )
    .option("--ca <file>", "the API server's CA certificate (PEM)")
    .option("--bootstrap-token-file <file>", "a file holding the fleet's bootstrap token")
    .option("--kubeconfig <file>", "instead of joining: the machine's own kubeconfig")
    .option(
      "--kernel-args <args>",
      "kernel arguments of every boot; %s is the slot's letter",
      DEFAULT_KERNEL_ARGS,
    )
    .option(
      "--trial-args <args>",
      "kernel arguments of a trial boot (systemd-boot: of every boot)",
      DEFAULT_TRIAL_ARGS,
    )
    .option(
      "--serial-console",
      "GRUB, the kernel and the agent's log also on the serial console (ttyS0, 115200 baud)",
      false,
    )
    .option(
      "--state-file <path=file>",
      "put FILE on the state partition at PATH, mode 0600 (repeatable; e.g. the kubelet's bootstrap kubeconfig)",
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option(
      "--wipe",
      "write over a disk that has partitions or a filesystem (everything on it is lost)",
      false,
    );
}

async function run(target: string, mode: "disk" | "image", f: MachineFlags): Promise<void> {
  const r = await installMachine(installOptions(target, mode, f));
  process.stdout.write(
    `${r.target}: release ${r.version} (${r.digest}) in slot a, ${f.bootloader}; agent.yaml:\n${r.agentYaml}`,
  );
}

export function registerMachine(program: Command): void {
  const machine = program
    .command("machine")
    .description("Install liken machines (a disk, or a disk image), and hold one at its release");
  registerHold(machine);
  common(
    machine
      .command("install <disk>")
      .description(
        "Make the whole block device <disk> a liken machine (it must not be mounted or in use; --wipe to write over partitions)",
      ),
  ).action((disk: string, f: MachineFlags) => run(disk, "disk", f));
  common(
    machine
      .command("image <file>")
      .description(
        "Write a raw disk image of a liken machine to <file>, to dd onto a disk or boot over PXE",
      )
      .option(
        "--size <size>",
        "the image's size (default: exactly what the partitions take)",
        parseSize,
      ),
  ).action((file: string, f: MachineFlags) => run(file, "image", f));
}
