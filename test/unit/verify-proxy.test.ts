// liken's HTTP through the standard proxy variables: a real loopback server behind a real
// CONNECT proxy (test/support/connect-proxy.ts).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { fetchDocument, openArtifact } from "../../src/verify/fetch.js";
import { describeProxy, proxyDispatcher, proxySettings } from "../../src/verify/proxy.js";
import { startConnectProxy, type ConnectProxy } from "../support/connect-proxy.js";

const ARTIFACT = Buffer.from("0123456789abcdef");
const VARS = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"];
const saved = Object.fromEntries(VARS.map((v) => [v, process.env[v]]));

let server: Server;
let origin: string;
let proxy: ConnectProxy;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url !== "/rootfs") return void res.end("versions: [2026.12.01-001]\n");
    // An artifact resumed at byte 4: the Range header must have come through the tunnel.
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    const from = Number(range?.[1] ?? 0);
    res.writeHead(range ? 206 : 200, {
      ...(range
        ? { "content-range": `bytes ${from}-${ARTIFACT.length - 1}/${ARTIFACT.length}` }
        : {}),
      "content-length": String(ARTIFACT.length - from),
    });
    res.end(ARTIFACT.subarray(from));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  origin = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy = await startConnectProxy((target) => {
    if (target !== origin) return undefined;
    const [host, port] = target.split(":");
    return { host: host!, port: Number(port) };
  });
});

afterAll(async () => {
  await proxy.close();
  await new Promise((r) => server.close(r));
});

afterEach(() => {
  for (const v of VARS) {
    if (saved[v] === undefined) delete process.env[v];
    else process.env[v] = saved[v];
  }
  proxy.targets.length = 0;
});

function setProxy(vars: Record<string, string>): void {
  for (const v of VARS) delete process.env[v];
  Object.assign(process.env, vars);
}

describe("the proxy variables", () => {
  it("send the channel's request through the proxy named by http_proxy", async () => {
    setProxy({ http_proxy: proxy.url });
    const doc = await fetchDocument(new URL(`http://${origin}/channel.yaml`), 1024);
    expect(doc.toString()).toContain("2026.12.01-001");
    expect(proxy.targets).toEqual([origin]);
  });

  it("carry an artifact's resumed download (its Range request) through the tunnel", async () => {
    setProxy({ HTTPS_PROXY: "http://127.0.0.1:9", http_proxy: proxy.url });
    const a = await openArtifact(new URL(`http://${origin}/rootfs`), 4, ARTIFACT.length);
    const parts: Buffer[] = [];
    for await (const chunk of a.body) parts.push(chunk as Buffer);
    expect(Buffer.concat(parts).toString()).toBe("456789abcdef");
    expect(proxy.targets).toEqual([origin]);
  });

  it("reach a host named in NO_PROXY directly", async () => {
    setProxy({ HTTP_PROXY: proxy.url, NO_PROXY: "localhost,127.0.0.1" });
    await fetchDocument(new URL(`http://${origin}/channel.yaml`), 1024);
    expect(proxy.targets).toEqual([]);
  });

  it("say which proxy refused, without its password", async () => {
    const refusing = proxy.url.replace("http://", "http://fleet:s3cret@");
    setProxy({ HTTP_PROXY: refusing });
    const url = new URL(`http://127.0.0.2:9/channel.yaml`);
    const e = (await fetchDocument(url, 1024).catch((x: unknown) => x)) as Error & {
      code: string;
    };
    expect(e.code).toBe("LIKEN_VERIFY_CONNECTION");
    expect(e.message).toContain(`GET ${url.href}`);
    expect(e.message).toContain(`http_proxy=${proxy.url.replace("http://", "http://***@")}/`);
    expect(e.message).toContain("check that the proxy is up and allows 127.0.0.2:9");
    expect(e.message).not.toContain("s3cret");
    expect(proxy.targets).toEqual(["127.0.0.2:9"]);
  });

  it("leave undici's own agent in place when none is set", () => {
    expect(proxyDispatcher({})).toBeUndefined();
    expect(proxyDispatcher({ NO_PROXY: "*" })).toBeUndefined();
    expect(proxyDispatcher({ HTTPS_PROXY: "http://127.0.0.1:3128" })).toBeDefined();
  });

  it("are read as curl reads them: lower case first, https falling back to http", () => {
    expect(
      proxySettings({ http_proxy: "http://a:1", HTTP_PROXY: "http://b:2", NO_PROXY: ".corp" }),
    ).toEqual({ http: "http://a:1", noProxy: ".corp" });
    expect(proxySettings({ http_proxy: "", HTTP_PROXY: "http://b:2" })).toEqual({
      http: "http://b:2",
    });
    expect(describeProxy({})).toBeUndefined();
    expect(describeProxy({ https: "nonsense" })).toBe("https_proxy=(not a URL)");
  });
});
