// The standard proxy variables for liken's HTTP (the channel, release documents, artifacts),
// read as curl reads them: `http_proxy`/`HTTP_PROXY` for http:// URLs, `https_proxy`/
// `HTTPS_PROXY` for https:// ones (the HTTP proxy when unset), `no_proxy`/`NO_PROXY` for the
// hosts reached directly. A fleet whose machines reach the release channel only through a
// proxy sets them in the agent's unit and in the operator's Deployment (docs/proxy.md).
//
// undici's EnvHttpProxyAgent does the NO_PROXY matching and the tunnel (CONNECT, also for
// http:// URLs); liken only chooses it when a variable is set, so a process without a proxy
// keeps undici's default agent.
import { EnvHttpProxyAgent, type Dispatcher } from "undici";

export interface ProxySettings {
  http?: string;
  https?: string;
  noProxy?: string;
}

function first(env: NodeJS.ProcessEnv, ...names: string[]): string | undefined {
  for (const n of names) {
    const v = env[n];
    if (v !== undefined && v !== "") return v;
  }
  return undefined;
}

/** What the variables say; lower case wins, as in curl. */
export function proxySettings(env: NodeJS.ProcessEnv = process.env): ProxySettings {
  const http = first(env, "http_proxy", "HTTP_PROXY");
  const https = first(env, "https_proxy", "HTTPS_PROXY");
  const noProxy = first(env, "no_proxy", "NO_PROXY");
  return {
    ...(http !== undefined ? { http } : {}),
    ...(https !== undefined ? { https } : {}),
    ...(noProxy !== undefined ? { noProxy } : {}),
  };
}

/** The settings for an error message: a proxy's user and password are not printed. */
export function describeProxy(s: ProxySettings): string | undefined {
  const hide = (u: string): string => {
    try {
      const url = new URL(u);
      if (url.username !== "" || url.password !== "") {
        url.username = "***";
        url.password = "";
      }
      return url.href;
    } catch {
      return "(not a URL)";
    }
  };
  const parts = [
    ...(s.http !== undefined ? [`http_proxy=${hide(s.http)}`] : []),
    ...(s.https !== undefined ? [`https_proxy=${hide(s.https)}`] : []),
    ...(s.noProxy !== undefined ? [`no_proxy=${s.noProxy}`] : []),
  ];
  return parts.length === 0 ? undefined : parts.join(", ");
}

let cached: { key: string; dispatcher: Dispatcher | undefined } | undefined;

/**
 * The dispatcher for liken's requests: an EnvHttpProxyAgent when a proxy is set, undefined
 * (undici's global agent) when none is. Made once per set of values.
 */
export function proxyDispatcher(env: NodeJS.ProcessEnv = process.env): Dispatcher | undefined {
  const s = proxySettings(env);
  const key = JSON.stringify(s);
  if (cached?.key !== key) {
    cached = {
      key,
      // Every field given, "" for unset: EnvHttpProxyAgent would otherwise read process.env.
      dispatcher:
        s.http === undefined && s.https === undefined
          ? undefined
          : new EnvHttpProxyAgent({
              httpProxy: s.http ?? "",
              httpsProxy: s.https ?? s.http ?? "",
              noProxy: s.noProxy ?? "",
            }),
    };
  }
  return cached.dispatcher;
}
