// What a release channel's `source` must be, said for what it is: the CRD's CEL rules on
// spec.releases.source (config/crd/liken.sh_clusters.yaml) and the CLI's checks of a
// --source or <source> share these sentences, so a person reads the same fix in both places.
// No imports: the agent's lean entry uses it.

export const SOURCE_PROBLEMS = {
  scheme:
    "only http:// and https:// URLs are accepted (for example https://releases.example.com/stable)",
  channelFile:
    "give the channel's directory, not its channel.yaml: drop the trailing /channel.yaml (liken reads <source>/channel.yaml itself)",
  notUrl: "it is not a URL with a host: give it as https://HOST[:PORT]/PATH",
} as const;

/** Why `text` cannot be a channel's source, or undefined when it can. */
export function sourceProblem(text: string): string | undefined {
  if (!/^https?:\/\//.test(text)) return SOURCE_PROBLEMS.scheme;
  if (/\/channel\.yaml\/?$/.test(text)) return SOURCE_PROBLEMS.channelFile;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return SOURCE_PROBLEMS.notUrl;
  }
  if (url.hostname === "" || /\s/.test(text)) return SOURCE_PROBLEMS.notUrl;
  return undefined;
}
