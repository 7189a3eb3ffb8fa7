import { describe, expect, it } from "vitest";
import type { V1Pod } from "@kubernetes/client-node";
import {
  identifyDriver,
  mayRunAPlugin,
  mountsPluginDirOf,
  type DriverPodSelectors,
} from "../../src/drain/drivers.js";
import { parseMatchLabels, selectorMatches } from "../../src/drain/selector.js";
import { GPU, pod } from "./drain-fixtures.js";

describe("mountsPluginDirOf: the plugin-directory rule for one pod", () => {
  const cases: { paths: string[]; want: boolean }[] = [
    { paths: [`/var/lib/kubelet/plugins/${GPU}`], want: true },
    { paths: [`/var/lib/kubelet/plugins/${GPU}/`], want: true },
    { paths: [`/var/lib/kubelet/plugins/${GPU}/sock`], want: true },
    { paths: [`/var/lib/kubelet/plugins/x/../${GPU}`], want: true },
    { paths: [`/var/lib/kubelet/plugins/${GPU}-other`], want: false },
    { paths: ["/var/lib/kubelet/plugins"], want: false },
    { paths: ["/var/lib/kubelet/plugins_registry"], want: false },
    {
      paths: ["/var/lib/kubelet/plugins_registry", `/var/lib/kubelet/plugins/dra-${GPU}`],
      want: true,
    },
    { paths: [`/var/lib/kubelet/plugins/dra-${GPU}`], want: false },
    { paths: ["/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins"], want: false },
    { paths: [`/opt/${GPU}`], want: false },
  ];
  it.each(cases)("$paths -> $want", ({ paths, want }) => {
    expect(mountsPluginDirOf(pod({ name: "p", hostPaths: paths }), GPU)).toBe(want);
  });
});

describe("identifyDriver: selector first, then the plugin directory of a DaemonSet pod", () => {
  const dsPod = pod({
    name: "ds",
    daemonSet: true,
    hostPaths: [`/var/lib/kubelet/plugins/${GPU}`],
    labels: { app: "gpu" },
  });
  const plainPod = pod({ name: "plain", hostPaths: [`/var/lib/kubelet/plugins/${GPU}`] });
  const labelled = pod({ name: "labelled", ns: "gpu-system", labels: { app: "gpu-kp" } });

  it.each<{ name: string; pods: V1Pod[]; sel: DriverPodSelectors; by: string; uids: string[] }>([
    {
      name: "plugin-dir DaemonSet pod",
      pods: [dsPod, plainPod],
      sel: {},
      by: "plugin-dir",
      uids: ["uid-ds"],
    },
    {
      name: "a plugin dir on a non-DaemonSet pod is not enough",
      pods: [plainPod],
      sel: {},
      by: "unidentified",
      uids: [],
    },
    {
      name: "configured selector wins",
      pods: [dsPod, labelled],
      sel: { [GPU]: { selector: { matchLabels: { app: "gpu-kp" } } } },
      by: "selector",
      uids: ["uid-labelled"],
    },
    {
      name: "configured namespace narrows the selector; no match falls through to the dir rule",
      pods: [dsPod, labelled],
      sel: { [GPU]: { namespace: "other", selector: { matchLabels: { app: "gpu-kp" } } } },
      by: "plugin-dir",
      uids: ["uid-ds"],
    },
  ])("$name", ({ pods, sel, by, uids }) => {
    expect(identifyDriver(GPU, pods, sel)).toEqual({ driver: GPU, by, podUids: uids });
  });
});

describe("mayRunAPlugin: candidates for an unidentified driver", () => {
  it.each([
    { paths: ["/"], want: true },
    { paths: ["/var/lib/kubelet"], want: true },
    { paths: ["/var/lib/kubelet/plugins"], want: true },
    { paths: ["/var/lib/kubelet/plugins_registry"], want: true },
    { paths: ["/var/lib/kubelet/pods"], want: false },
    { paths: ["/var/log", "/etc"], want: false },
    { paths: [], want: false },
  ])("$paths -> $want", ({ paths, want }) => {
    expect(mayRunAPlugin(pod({ name: "p", hostPaths: paths }))).toBe(want);
  });
});

describe("selectorMatches", () => {
  const labels = { app: "web", tier: "front" };
  it.each([
    { sel: undefined, want: false },
    { sel: {}, want: true },
    { sel: { matchLabels: { app: "web" } }, want: true },
    { sel: { matchLabels: { app: "db" } }, want: false },
    {
      sel: { matchExpressions: [{ key: "tier", operator: "In", values: ["front", "x"] }] },
      want: true,
    },
    {
      sel: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["front"] }] },
      want: false,
    },
    { sel: { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] }, want: true },
    { sel: { matchExpressions: [{ key: "app", operator: "Exists" }] }, want: true },
    { sel: { matchExpressions: [{ key: "app", operator: "DoesNotExist" }] }, want: false },
    { sel: { matchExpressions: [{ key: "app", operator: "Gt", values: ["1"] }] }, want: false },
  ])("$sel -> $want", ({ sel, want }) => {
    expect(selectorMatches(sel, labels)).toBe(want);
  });

  it("parses key=value,key=value and refuses anything else", () => {
    expect(parseMatchLabels("app=gpu, tier = x")).toEqual({
      matchLabels: { app: "gpu", tier: "x" },
    });
    expect(parseMatchLabels("app")).toBeUndefined();
    expect(parseMatchLabels("=x")).toBeUndefined();
  });
});
