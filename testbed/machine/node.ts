// What makes a liken machine a Kubernetes node (docs/machine.md, "A node image"): Debian's
// containerd, runc and CNI plugins (rootfs.ts installs them), the kubelet and pause binaries
// of the control plane's pinned Kubernetes (src/controlplane/node-tools.ts), a bridge CNI
// network, containerd with CDI on (DRA drivers hand devices over as CDI specs), the kubelet's
// unit and KubeletConfiguration, and the container images loaded offline at every boot. The
// kubelet's and containerd's state live on the state partition, so the slots stay whole
// release images and what the node holds survives a change of slot.
import {
  appendFileSync,
  chmodSync,
  copyFileSync,
  mkdirSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { run } from "./cache.js";

/** The node's own directory on the state partition (per machine, the same in both slots). */
export const NODE_STATE = "/var/lib/liken/node";
/** Written per machine onto the state partition (testbed/machine/state.ts, kubelet-identity). */
export const KUBELET_KUBECONFIG = `${NODE_STATE}/kubelet.kubeconfig`;
export const KUBELET_ENV = `${NODE_STATE}/kubelet.env`;
export const KUBELET_CLIENT_CA = `${NODE_STATE}/ca.crt`;
/** Where the images loaded at boot sit in the slot (OCI archives, node-images.ts). */
export const IMAGES_DIR = "/usr/lib/liken-node/images";
/** The sandbox image: the name containerd asks for, and the tag of the pause image loaded. */
export const PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1";
/** The scenario's workload (workload.c): stops a few seconds after SIGTERM. */
export const WORKLOAD_IMAGE = "liken.local/workload:1";
/**
 * The DRA test driver of the pinned Kubernetes tree (kubelet-plugin mode), run by the scenario
 * as a DaemonSet pod on the node (test/qemu/dra-manifests.ts).
 */
export const DRA_DRIVER_IMAGE = "liken.local/dra-test-driver:1";
/** The DaemonSet's pods are named after it, and its container is `plugin`: their log files. */
export const DRA_DRIVER_POD_PREFIX = "dra-test-driver-";
/** What marks the driver's log lines on the serial console (dra-log). */
export const DRA_CONSOLE_MARK = "LIKEN-DRA";
/** CNI plugins the node's network uses; Debian's package brings many more, left out of the slot. */
const CNI_PLUGINS = ["bridge", "host-local", "loopback"];

/** Bind mounts from the state partition: directories state.ts/disk.ts create on it. */
export const NODE_STATE_DIRS = ["node/containerd", "node/kubelet", "node/pod-logs"] as const;
export const NODE_FSTAB = `# The node's state is on the state partition (docs/machine.md, "A node image").
${NODE_STATE}/containerd  /var/lib/containerd  none  bind,x-systemd.requires-mounts-for=/var/lib/liken  0 0
${NODE_STATE}/kubelet     /var/lib/kubelet     none  bind,x-systemd.requires-mounts-for=/var/lib/liken  0 0
${NODE_STATE}/pod-logs    /var/log/pods        none  bind,x-systemd.requires-mounts-for=/var/lib/liken  0 0
`;

/**
 * containerd 1.7 (Debian trixie's), config version 2: systemd cgroups as the kubelet's
 * cgroupDriver, the pause image that is loaded offline, CDI on for DRA, Debian's CNI paths.
 */
const CONTAINERD_CONFIG = `version = 2
# Snapshotters a VM without btrfs, ZFS or devmapper cannot use: fewer errors at start.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`;

/** One bridge on the node, addresses from host-local; no masquerade (the guest reaches nothing). */
const CNI_CONFIG = `${JSON.stringify(
  {
    cniVersion: "1.0.0",
    name: "liken-node",
    plugins: [
      {
        type: "bridge",
        bridge: "cni0",
        isGateway: true,
        ipMasq: false,
        ipam: {
          type: "host-local",
          ranges: [[{ subnet: "10.88.0.0/24" }]],
          routes: [{ dst: "0.0.0.0/0" }],
        },
      },
    ],
  },
  null,
  2,
)}\n`;

const LOOPBACK_CNI = `${JSON.stringify({ cniVersion: "1.0.0", name: "lo", type: "loopback" }, null, 2)}\n`;

/**
 * The kubelet's settings (docs/machine.md lists why each is set). No shutdownGracePeriod:
 * liken drains before it reboots, so pods are stopped (and DRA claims unprepared) by the
 * kubelet at eviction, not at shutdown (docs/drain.md).
 */
const KUBELET_CONFIG = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# The guest has no swap; a VM with some must not stop the kubelet.
failSwapOn: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ${KUBELET_CLIENT_CA}
authorization:
  mode: Webhook
# No cluster DNS in the testbed and no resolver in the image.
resolvConf: ""
# The certificate is issued per machine through the CSR API and written to the state
# partition; the kubelet does not rotate it.
rotateCertificates: false
# Images are loaded offline at boot and cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
# The state partition is small: evict only when it is really full.
evictionHard:
  memory.available: "32Mi"
  nodefs.available: "2%"
  imagefs.available: "2%"
maxPods: 16
`;

/**
 * The kubelet's unit: the Node's name, address and labels come from the state partition
 * (per machine). Its log goes to the serial console too, beside the agent's: a node that does
 * not come Ready says why there (about 200 lines a run at the default verbosity).
 */
const KUBELET_UNIT = `[Unit]
Description=kubelet (liken node)
Documentation=https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/
# A machine with no kubelet identity (the image's smoke boot) runs no kubelet.
ConditionPathExists=${KUBELET_KUBECONFIG}
Wants=containerd.service liken-node-images.service
After=containerd.service liken-node-images.service network-online.target
RequiresMountsFor=/var/lib/kubelet /var/lib/liken

[Service]
EnvironmentFile=${KUBELET_ENV}
ExecStart=/usr/bin/kubelet --config=/etc/kubernetes/kubelet.yaml --kubeconfig=${KUBELET_KUBECONFIG} --hostname-override=\${NODE_NAME} --node-ip=\${NODE_IP} --node-labels=\${NODE_LABELS}
Restart=always
RestartSec=5
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
`;

/** containerd's state is on the state partition: start it only once that is mounted. */
const CONTAINERD_DROPIN = `[Unit]
RequiresMountsFor=/var/lib/containerd
`;

const IMAGES_UNIT = `[Unit]
Description=liken: load the node's container images (offline, no registry)
Requires=containerd.service
After=containerd.service
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/lib/liken-node/load-images
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
`;

/**
 * Each OCI archive of IMAGES_DIR into containerd's k8s.io namespace (the CRI's), under the name
 * its index carries (io.containerd.image.name). Runs at every boot: importing what is there
 * already is cheap and a new release may bring new images.
 */
const LOAD_IMAGES = `#!/bin/sh
set -eu
for a in ${IMAGES_DIR}/*.tar; do
  ctr --namespace k8s.io images import "$a" >/dev/null
done
echo "LIKEN-NODE images loaded: $(ctr --namespace k8s.io images list --quiet | grep -v '^sha256:' | tr '\\n' ' ')"
`;

/**
 * The testbed's window on the DRA driver: the driver pod's log file (CRI format, under
 * /var/log/pods, kept by the kubelet) followed from the moment it appears, its lines about CDI
 * files (one per prepared and unprepared claim) and its errors copied to the serial console
 * with a mark, so the host sees when the kubelet's NodeUnprepareResources reached the driver
 * (test/qemu/dra-order.ts). A pod started again (the DaemonSet's next pod) is a new file,
 * followed too. busybox-free: only coreutils, grep and sed of the minimal system.
 */
const DRA_LOG = `#!/bin/sh
seen=" "
while :; do
  for f in /var/log/pods/*_${DRA_DRIVER_POD_PREFIX}*_*/plugin/*.log; do
    [ -f "$f" ] || continue
    case "$seen" in *" $f "*) continue ;; esac
    seen="$seen$f "
    tail -n +1 -F "$f" 2>/dev/null | grep --line-buffered -E '"CDI file|std(out|err) [FP] E' |
      sed -u 's/^/${DRA_CONSOLE_MARK} /' &
  done
  sleep 1
done
`;

const DRA_LOG_UNIT = `[Unit]
Description=liken testbed: the DRA driver's CDI log lines on the console
After=kubelet.service
RequiresMountsFor=/var/log/pods
ConditionPathExists=${KUBELET_KUBECONFIG}

[Service]
ExecStart=/usr/lib/liken-node/dra-log
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
`;

function put(root: string, path: string, text: string, mode = 0o644): void {
  const p = join(root, path);
  mkdirSync(dirname(p), { recursive: true });
  rmSync(p, { force: true });
  writeFileSync(p, text);
  chmodSync(p, mode);
}

/**
 * Makes a configured liken guest a node: the binaries (kubelet, pause) from `binDir`, the OCI
 * archives `images` (file paths), containerd's and the kubelet's configuration and units.
 */
export function configureNode(root: string, binDir: string, images: readonly string[]): void {
  for (const b of ["kubelet"]) {
    copyFileSync(join(binDir, b), join(root, "usr/bin", b));
    chmodSync(join(root, "usr/bin", b), 0o755);
  }
  // containerd's legacy shims: the CRI runs every pod with io.containerd.runc.v2.
  for (const b of ["containerd-shim", "containerd-shim-runc-v1"]) rmSync(join(root, "usr/bin", b));
  const cni = join(root, "usr/lib/cni");
  for (const p of readdirSync(cni)) if (!CNI_PLUGINS.includes(p)) rmSync(join(cni, p));
  mkdirSync(join(root, IMAGES_DIR.slice(1)), { recursive: true });
  for (const i of images) copyFileSync(i, join(root, IMAGES_DIR.slice(1), i.split("/").pop()!));
  appendFileSync(join(root, "etc/fstab"), NODE_FSTAB);
  put(root, "etc/containerd/config.toml", CONTAINERD_CONFIG);
  put(root, "etc/cni/net.d/10-liken-node.conflist", CNI_CONFIG);
  put(root, "etc/cni/net.d/99-loopback.conf", LOOPBACK_CNI);
  put(root, "etc/kubernetes/kubelet.yaml", KUBELET_CONFIG);
  put(root, "etc/systemd/system/kubelet.service", KUBELET_UNIT);
  put(root, "etc/systemd/system/containerd.service.d/liken-node.conf", CONTAINERD_DROPIN);
  put(root, "etc/systemd/system/liken-node-images.service", IMAGES_UNIT);
  put(root, "usr/lib/liken-node/load-images", LOAD_IMAGES, 0o755);
  put(root, "etc/systemd/system/liken-dra-log.service", DRA_LOG_UNIT);
  put(root, "usr/lib/liken-node/dra-log", DRA_LOG, 0o755);
  for (const d of ["var/lib/containerd", "var/lib/kubelet", "var/log/pods"]) {
    mkdirSync(join(root, d), { recursive: true });
  }
  run("chroot", [
    root,
    "systemctl",
    "enable",
    "containerd.service",
    "kubelet.service",
    "liken-node-images.service",
    "liken-dra-log.service",
  ]);
}

/** What is per machine of the node: on the state partition, the same in both slots. */
export interface NodeFiles {
  /** The Node's name (the kubelet's --hostname-override): the Machine's spec.nodeName. */
  nodeName: string;
  /** Labels the kubelet registers the Node with. */
  labels: Record<string, string>;
  /** The kubelet's kubeconfig (its client certificate inline). */
  kubeconfig: string;
  /** The CA the kubelet trusts for client certificates on its own port. */
  clientCaPem: string;
  /**
   * The Node's address (the kubelet's --node-ip): needed where the kubelet cannot find it by
   * itself, a network with no default route (the testbed's QEMU user network with
   * restrict=on hands out 10.0.2.15 and no router).
   */
  nodeIp: string;
}

/** Writes `node` under `stateDir` (the state partition's root), where the kubelet reads it. */
export function writeNodeFiles(stateDir: string, node: NodeFiles): void {
  const at = (p: string): string => join(stateDir, p.slice("/var/lib/liken/".length));
  mkdirSync(dirname(at(KUBELET_KUBECONFIG)), { recursive: true });
  writeFileSync(at(KUBELET_KUBECONFIG), node.kubeconfig, { mode: 0o600 });
  writeFileSync(at(KUBELET_CLIENT_CA), node.clientCaPem, { mode: 0o644 });
  const labels = Object.entries(node.labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  writeFileSync(
    at(KUBELET_ENV),
    `NODE_NAME=${node.nodeName}\nNODE_IP=${node.nodeIp}\nNODE_LABELS=${labels}\n`,
  );
}
