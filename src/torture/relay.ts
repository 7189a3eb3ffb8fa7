// A TCP relay between one machine's agent and kube-apiserver: the agent's kubeconfig names
// the relay's loopback port, so the torture can cut that one machine's network (every open
// connection reset, new ones refused) while the rest of the fleet and the API server run on.
// TLS passes through untouched: the API server's certificate names 127.0.0.1, as the relay does.
import net from "node:net";
import type { AddressInfo } from "node:net";

export class Relay {
  private readonly open = new Set<net.Socket>();
  private cut = false;
  private readonly server: net.Server;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.accept(client));
  }

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    return `https://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private accept(client: net.Socket): void {
    if (this.cut) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(this.target);
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.open.add(a);
      a.on("error", () => b.destroy());
      a.on("close", () => {
        this.open.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  }

  /** Cuts the machine off: open connections reset, new ones refused, until `heal`. */
  sever(): void {
    this.cut = true;
    for (const s of this.open) s.resetAndDestroy();
  }

  heal(): void {
    this.cut = false;
  }

  async close(): Promise<void> {
    this.sever();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
