// The lab's stand-in for the Service cluster-operator-webhook (config/webhook/): one loopback
// port in front of every operator copy's webhook port, each connection to the next copy in
// turn, passing over a copy that refuses connections. Like a Service, it cannot tell a paused
// copy (SIGSTOP still accepts connections) from a slow one: the API server's timeoutSeconds
// refuses that eviction, and the drain's retry reaches the other copy.
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { freePort } from "../controlplane/ports.js";

export interface WebhookService {
  port: number;
  /** The ports of the copies behind it, one per `liken operator --webhook-listen`. */
  backends: number[];
  close(): Promise<void>;
}

export async function startWebhookService(copies: number): Promise<WebhookService> {
  const backends: number[] = [];
  for (let i = 0; i < copies; i++) backends.push(await freePort());
  const sockets = new Set<Socket>();
  let next = 0;
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  };
  const forward = (down: Socket, tries: number): void => {
    const port = backends[next++ % backends.length]!;
    const up = connect(port, "127.0.0.1");
    track(up);
    up.once("connect", () => {
      up.on("error", () => down.destroy());
      down.on("error", () => up.destroy());
      down.pipe(up).pipe(down);
      down.resume();
    });
    up.once("error", () => {
      up.destroy();
      if (tries > 1 && !down.destroyed) forward(down, tries - 1);
      else down.destroy();
    });
  };
  const server = createServer({ pauseOnConnect: true }, (down) => {
    track(down);
    down.on("error", () => down.destroy());
    forward(down, backends.length);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    backends,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
