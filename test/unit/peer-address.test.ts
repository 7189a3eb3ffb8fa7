// Which peer address is handed out and which one a downloader takes (docs/peers.md, "Which
// address is handed out"): the operator ties a holder to its Node's address, and a downloader
// refuses any URL that is not http://<IP>:<port>/ of a host.
import { describe, expect, it } from "vitest";
import { peerUrlRefusal } from "../../src/agent/peer-serving.js";
import { tiedPeerUrl, type NodeAddress } from "../../src/operator/peers/address.js";

const NODE: NodeAddress[] = [
  { type: "Hostname", address: "m1" },
  { type: "ExternalIP", address: "203.0.113.7" },
  { type: "InternalIP", address: "10.0.0.7" },
];

describe("tiedPeerUrl", () => {
  it.each<[string, string, NodeAddress[] | undefined, string]>([
    [
      "the Node's InternalIP and the advertised port",
      "http://m1:7450/",
      NODE,
      "http://10.0.0.7:7450/",
    ],
    [
      "the advertised host when it is one of the Node's",
      "http://203.0.113.7:7451/",
      NODE,
      "http://203.0.113.7:7451/",
    ],
    [
      "another host (a service, metadata): the Node's instead",
      "http://169.254.169.254:8080/",
      NODE,
      "http://10.0.0.7:8080/",
    ],
    [
      "ExternalIP when there is no InternalIP",
      "http://x:7450/",
      [NODE[1]!],
      "http://203.0.113.7:7450/",
    ],
    [
      "IPv6, bracketed",
      "http://x:7450/",
      [{ type: "InternalIP", address: "fd00::7" }],
      "http://[fd00::7]:7450/",
    ],
  ])("%s", (_, advertised, addresses, url) => {
    expect(tiedPeerUrl("m1", advertised, addresses)).toEqual({ url });
  });

  it.each<[string, string, NodeAddress[] | undefined, string]>([
    ["no port", "http://m1/", NODE, "NotAPeerUrl"],
    ["https (a peer is plain http)", "https://m1:7450/", NODE, "NotAPeerUrl"],
    ["a path", "http://m1:7450/admin/", NODE, "NotAPeerUrl"],
    ["credentials", "http://u:p@m1:7450/", NODE, "NotAPeerUrl"],
    ["a query", "http://m1:7450/?x=1", NODE, "NotAPeerUrl"],
    ["not a URL", "m1:7450", NODE, "NotAPeerUrl"],
    ["a Node with only a Hostname", "http://m1:7450/", [NODE[0]!], "NoNodeAddress"],
    ["a Node not read", "http://m1:7450/", undefined, "NoNodeAddress"],
  ])("refused: %s", (_, advertised, addresses, refused) => {
    const r = tiedPeerUrl("m1", advertised, addresses);
    expect(r).toMatchObject({ refused });
    expect((r as { message: string }).message).toContain("machine m1");
  });
});

describe("peerUrlRefusal (the downloader)", () => {
  it.each<[string, boolean]>([
    ["http://10.0.0.7:7450/", true],
    ["http://127.0.0.1:41234/", true],
    ["http://[fd00::7]:7450/", true],
    ["http://m1:7450/", false],
    ["http://metadata.google.internal:8080/", false],
    ["http://169.254.169.254:8080/", false],
    ["http://[fe80::1]:7450/", false],
    ["http://0.0.0.0:7450/", false],
    ["http://10.0.0.7/", false],
    ["https://10.0.0.7:7450/", false],
    ["http://10.0.0.7:7450/latest/meta-data/", false],
    ["http://u:p@10.0.0.7:7450/", false],
    ["file:///etc/passwd", false],
    ["not a url", false],
  ])("%s: taken %s", (url, taken) => {
    expect(peerUrlRefusal(url) === undefined).toBe(taken);
  });
});
