// agent.yaml, declared once (docs/adr/config-schema.md): the checks src/agent/config.ts runs,
// the TypeScript type of what it reads, and the JSON Schema published for editors
// (config/schema/agent.schema.json, written by `npm run schema:generate`) all come from here.
// The slots keys are declared by the slots module (src/slots/schema.ts), which reads them.
import { parseMetricsAddress } from "../metrics/serve.js";
import { bounded, strict, text, z } from "../schema/index.js";
import { slotsSection } from "../slots/schema.js";
import { LOST_AFTER_SECONDS, REBOOT_POLICIES, ROLES } from "../api/types.js";
import { MACHINE_FROM } from "./machine-name.js";
import { MAX_HEALTH_TIMEOUT_SECONDS } from "./health.js";
import { DEFAULT_TIMEOUTS, type Timeouts } from "./steps.js";

/**
 * Node's timers hold a 32-bit signed count of milliseconds: a longer delay is replaced by
 * 1 ms with a TimeoutOverflowWarning, so a timeout past it would fire at once.
 */
/**
 * The peer server's port when agent.yaml names none: `liken agent serve-peers`' default, an
 * unassigned port (IANA lists 7450 as unassigned), so the two agree out of the box.
 */
export const DEFAULT_PEERS_PORT = 7450;

export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The slowest heartbeat the operator's Lost rule allows: a quarter of the Lost threshold, so
 * three renewals in a row can be lost or late before the machine reads Lost (the kubelet
 * renews its node Lease at the same fraction, 10 s of 40 s). A slower heartbeat makes the
 * operator mark a live agent Lost again and again (docs/agent.md, "Bounds").
 */
export const MAX_HEARTBEAT_SECONDS = LOST_AFTER_SECONDS / 4;
/** Each renewal is a PUT: faster than once a second loads the API server for nothing. */
export const MIN_HEARTBEAT_SECONDS = 1;
/**
 * The loop's own look (the command line, the boot id, both slot markers) runs every turn:
 * more often than ten times a second is busy-waiting.
 */
export const MIN_LOOP_SECONDS = 0.1;
/**
 * The loop's turn is what notices a phase timeout and a download's progress when no watch
 * woke it: slower than the shortest default wait (downloadRetryMs, 60 s) it would double it.
 */
export const MAX_LOOP_SECONDS = 60;
/**
 * No phase finishes in less than a second (a status write, a drain, a read-back): a shorter
 * timeout fails every time.
 */
export const MIN_TIMEOUT_MS = 1000;

export const BOOTLOADER_EXAMPLE =
  "write `bootloader: {backend: grub, envDir: /boot/efi/EFI/liken}` or " +
  "`bootloader: {backend: systemd-boot, esp: /boot/efi, efivars: /sys/firmware/efi/efivars}`";

const directory = (about: string) => text("name a directory").describe(about);

const grub = strict(
  {
    backend: z.literal("grub"),
    envDir: directory("Where grubenv and grubenv2 live, next to liken's grub.cfg."),
  },
  { unknown: "a field of the grub backend (its fields: backend, envDir)" },
);
const systemdBoot = strict(
  {
    backend: z.literal("systemd-boot"),
    esp: directory("The EFI system partition: loader/entries/liken-a.conf and liken-b.conf."),
    efivars: directory("efivarfs: LoaderEntryOneShot and LoaderEntryDefault."),
  },
  { unknown: "a field of the systemd-boot backend (its fields: backend, esp, efivars)" },
);
const bootloader = z
  .discriminatedUnion("backend", [grub, systemdBoot], {
    error: (iss) =>
      iss.code === "invalid_union"
        ? `must be grub or systemd-boot: ${BOOTLOADER_EXAMPLE}`
        : iss.code === "invalid_type"
          ? `must be a mapping: ${BOOTLOADER_EXAMPLE}`
          : undefined,
  })
  .describe("Which bootloader boots the slots, and where its state lives.");

const reboot = strict({
  command: z
    .array(z.string({ error: "must be a string" }), {
      error: "must be a non-empty list of strings",
    })
    .min(1, { error: "must be a non-empty list of strings" })
    .optional()
    .describe("The command that reboots the machine (default [systemctl, reboot])."),
  exitCode: z
    .number({ error: "must be an integer from 2 to 254" })
    .int({ error: "must be an integer from 2 to 254" })
    .min(2, { error: "must be an integer from 2 to 254" })
    .max(254, { error: "must be an integer from 2 to 254" })
    .optional()
    .describe(
      "Instead of a command, exit with this code once every state is synced: the supervisor plays the reboot.",
    ),
})
  .refine((r) => r.command !== undefined || r.exitCode !== undefined, {
    error: "needs command (a list) or exitCode (2..254)",
  })
  .describe("How the agent reboots the machine into the next slot.");

const TIMEOUT_WHY =
  "milliseconds; Node fires a longer timer at once, and no phase ends in under a second";
const timeouts = strict(
  Object.fromEntries(
    Object.entries(DEFAULT_TIMEOUTS).map(([k, ms]) => [
      k,
      bounded(MIN_TIMEOUT_MS, MAX_TIMER_MS, TIMEOUT_WHY)
        .optional()
        .describe(`Milliseconds (default ${ms}).`),
    ]),
  ) as Record<keyof Timeouts, z.ZodOptional<z.ZodNumber>>,
  { unknown: "a known timeout" },
).describe("Each phase's timeout in milliseconds (docs/agent.md).");

const EXPRESSION_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;
const labelSelector = strict({
  matchLabels: z
    .record(z.string(), z.string({ error: "must be a string" }), {
      error: "must map label keys to string values",
    })
    .optional(),
  matchExpressions: z
    .array(
      strict({
        key: text("be a label key"),
        operator: z.enum(EXPRESSION_OPERATORS, {
          error: `must be one of ${EXPRESSION_OPERATORS.join(", ")}`,
        }),
        values: z.array(z.string({ error: "must be a string" })).optional(),
      }),
      { error: "must be a list of {key, operator: In|NotIn|Exists|DoesNotExist, values?}" },
    )
    .optional(),
}).refine((s) => s.matchLabels !== undefined || s.matchExpressions !== undefined, {
  error: "must name matchLabels or matchExpressions (an empty one matches every pod)",
});

const drain = strict({
  driverPods: z
    .record(
      z.string(),
      strict({
        namespace: text("be a namespace name").optional(),
        selector: labelSelector,
      }),
      { error: "must map driver names to {namespace?, selector}" },
    )
    .optional()
    .describe("DRA driver name -> the pods that run it, for the drain's order (docs/drain.md)."),
});

const HEALTH_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const healthCommand = strict({
  name: z
    .string({ error: "must be a name of letters, digits, '.', '_' or '-' (at most 63)" })
    .regex(HEALTH_NAME, {
      error: "must be a name of letters, digits, '.', '_' or '-' (at most 63)",
    }),
  command: z
    .array(z.string({ error: "must be a string" }), {
      error: 'must be a non-empty list of strings (argv; for a shell: [sh, -c, "..."])',
    })
    .min(1, { error: 'must be a non-empty list of strings (argv; for a shell: [sh, -c, "..."])' })
    .refine((argv) => argv[0] !== "", {
      error: 'must be a non-empty list of strings (argv; for a shell: [sh, -c, "..."])',
    }),
  timeoutSeconds: z
    .number({ error: "must be a positive number" })
    .positive({ error: "must be a positive number", abort: true })
    .max(MAX_HEALTH_TIMEOUT_SECONDS, { error: `must be at most ${MAX_HEALTH_TIMEOUT_SECONDS}` })
    .optional(),
});
const health = strict({
  commands: z
    .array(healthCommand, { error: "must be a list of {name, command, timeoutSeconds?}" })
    .superRefine((commands, ctx) => {
      const seen = new Set<string>();
      commands.forEach((c, i) => {
        if (seen.has(c.name))
          ctx.addIssue({
            code: "custom",
            path: [i, "name"],
            message: `${c.name} is named twice`,
            input: c.name,
          });
        seen.add(c.name);
      });
    })
    .optional(),
}).describe("Host checks a trial boot must pass before it is promoted (docs/agent.md).");

/** The Kubernetes API's floor for spec.expirationSeconds of a CertificateSigningRequest. */
export const MIN_CERT_SECONDS = 600;
/** Ten years: longer than any signer issues (kube-controller-manager's default is one year). */
export const MAX_CERT_SECONDS = 10 * 365 * 24 * 3600;
export const DEFAULT_CERT_SECONDS = 365 * 24 * 3600;
/** An approval takes seconds when cluster-operator approves; minutes mean nobody will. */
export const DEFAULT_APPROVAL_WARN_SECONDS = 120;

const identity = strict(
  {
    bootstrapKubeconfig: text("be a non-empty string").describe(
      "A kubeconfig with the fleet's shared bootstrap token: used only to file this machine's certificate request when it has no valid certificate (docs/machine.md, Identity).",
    ),
    expirationSeconds: bounded(
      MIN_CERT_SECONDS,
      MAX_CERT_SECONDS,
      "the API refuses a request for less than 600 s, and no signer issues ten years",
    )
      .optional()
      .describe(
        "The lifetime each certificate request asks for (default one year); the signer may issue shorter.",
      ),
    approvalWarnSeconds: bounded(1, 86_400, "say within a day that nobody approves")
      .optional()
      .describe(
        "After this long without approval the agent says so, and keeps waiting (default 120).",
      ),
  },
  {
    unknown:
      "a field of identity (its fields: bootstrapKubeconfig, expirationSeconds, approvalWarnSeconds)",
  },
).describe(
  "The machine's own identity: joined for with the bootstrap credential, written to kubeconfig, renewed before it expires.",
);

/** The keys the agent itself reads (the slots module reads slotsSection's). */
export const agentSection = {
  machine: text("be a non-empty string")
    .optional()
    .describe(
      "The Machine object's name (and its heartbeat Lease's). Default: the hostname, or the DMI serial (machineFrom).",
    ),
  cluster: text("be a non-empty string").describe("The Cluster this machine belongs to."),
  nodeName: text("be a non-empty string")
    .optional()
    .describe("The Node this machine runs as (default: machine)."),
  machineFrom: z
    .enum(MACHINE_FROM, { error: "must be hostname or dmi-serial" })
    .optional()
    .describe(
      "Without machine: take the hostname first (default; the DMI serial when the hostname is unset or localhost), or the DMI serial first.",
    ),
  role: z
    .enum(ROLES, { error: "must be Worker or Leader" })
    .optional()
    .describe(
      "The role the agent registers its Machine with. Default: Leader when its Node has the node-role.kubernetes.io/control-plane label, else Worker.",
    ),
  rebootPolicy: z
    .enum(REBOOT_POLICIES, { error: "must be Manual or Auto" })
    .optional()
    .describe("The reboot policy the agent registers its Machine with (default: Manual)."),
  kubeconfig: text("be a non-empty string")
    .optional()
    .describe(
      "Kubeconfig of the agent's identity (with identity: where the agent writes it); absent: KUBECONFIG or in-cluster.",
    ),
  identity: identity.optional(),
  bootId: text("be a non-empty string")
    .optional()
    .describe("This boot's identity file (default /proc/sys/kernel/random/boot_id)."),
  bootloader,
  reboot: reboot.optional(),
  heartbeatSeconds: bounded(
    MIN_HEARTBEAT_SECONDS,
    MAX_HEARTBEAT_SECONDS,
    `the operator reads a machine Lost after ${LOST_AFTER_SECONDS} s without a renewal, so a slower heartbeat makes a live machine read Lost; lower it`,
  )
    .optional()
    .describe("How often the heartbeat Lease is renewed (default 10)."),
  loopSeconds: bounded(
    MIN_LOOP_SECONDS,
    MAX_LOOP_SECONDS,
    "the loop notices timeouts and download progress at this pace (docs/agent.md)",
  )
    .optional()
    .describe("How often the loop looks again when nothing woke it (default 5)."),
  direct: z
    .boolean({ error: "must be true or false" })
    .optional()
    .describe("Read artifacts back with O_DIRECT (default true; false for files on tmpfs)."),
  timeouts: timeouts.optional(),
  drain: drain.optional(),
  metricsAddress: z
    .string({ error: 'must be "host:port" or "off"' })
    .superRefine((v, ctx) => {
      try {
        parseMetricsAddress(v);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: (e as Error).message, input: v });
      }
    })
    .optional()
    .describe('Where to serve Prometheus metrics: "host:port", ":port" or "off" (the default).'),
  peersAddress: z
    .string({ error: 'must be "host:port", ":port" or "off"' })
    .superRefine((v, ctx) => {
      try {
        parseMetricsAddress(v);
      } catch {
        ctx.addIssue({
          code: "custom",
          message: `"${v}" is not "host:port", ":port" or "off" (e.g. ":${DEFAULT_PEERS_PORT}")`,
          input: v,
        });
      }
    })
    .optional()
    .describe(
      `Where to serve verified chunks to peers when the Cluster turns peers on (spec.peers): ` +
        `"host:port", ":port" (default ":${DEFAULT_PEERS_PORT}") or "off" (never serve).`,
    ),
  health: health.optional(),
};

/**
 * What the agent checks: its own keys strictly, and the slots module's keys let through
 * (src/slots/config.ts checks them, with its own error code).
 */
export const agentFile = strict({
  ...agentSection,
  slots: z.unknown().optional(),
  stateDir: z.unknown().optional(),
  running: z.unknown().optional(),
  cmdline: z.unknown().optional(),
});
export type AgentFile = z.output<typeof agentFile>;

/** The whole file, both modules' keys: the schema editors are given. */
export const wholeAgentFile = strict({ ...slotsSection, ...agentSection }).describe(
  "liken's agent config, /etc/liken/agent.yaml (docs/agent.md). Unknown keys are refused; relative paths resolve against this file's directory.",
);

/** agent.yaml as a program writes it (the lab, the machine image): checked by the compiler. */
export type AgentYaml = z.input<typeof wholeAgentFile>;

/** The JSON Schema of agent.yaml (draft-07: what yaml-language-server reads). */
export function agentJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(wholeAgentFile, { target: "draft-7", io: "input" }),
    title: "liken agent.yaml",
  };
}
