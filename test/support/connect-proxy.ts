// A forward proxy on loopback that speaks CONNECT, as the proxies in front of fleets do (and
// as undici's ProxyAgent asks, for http:// URLs too). `route` says where each requested
// host:port really goes, or refuses it (403). It records every target it was asked for.
import { createServer, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";

export interface ConnectProxy {
  url: string;
  /** Every CONNECT target asked for, in order ("host:port"). */
  targets: string[];
  close(): Promise<void>;
}

export async function startConnectProxy(
  route: (target: string) => { host: string; port: number } | undefined,
): Promise<ConnectProxy> {
  const targets: string[] = [];
  const open = new Set<Socket>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(405, { "content-type": "text/plain" }).end("this proxy speaks CONNECT only\n");
  });
  server.on("connect", (req, client: Socket, head: Buffer) => {
    const target = req.url ?? "";
    targets.push(target);
    open.add(client);
    client.on("close", () => open.delete(client));
    client.on("error", () => client.destroy());
    const to = route(target);
    if (to === undefined) {
      client.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
      return;
    }
    const upstream = connect(to.port, to.host, () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    open.add(upstream);
    upstream.on("close", () => open.delete(upstream));
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    targets,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
