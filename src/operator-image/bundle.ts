// How the image's one JavaScript file is built: the CLI with its npm dependencies inside (the
// image has no node_modules), plus one repair to node-fetch that Debian's Node needs.
import { readFileSync } from "node:fs";
import type { BuildOptions, Plugin } from "esbuild";
import { ImageError } from "./errors.js";

/**
 * node-fetch 2 (under @kubernetes/client-node) calls a chunked response cut short when its
 * socket still has a 'data' listener once the response closes. The fix for CVE-2026-48931,
 * which Debian backported into trixie's nodejs 20.19.2+dfsg-1+deb13u3, leaves one there on
 * every keep-alive socket, so every complete answer read "Premature close" (nodejs/node#63989;
 * Node fixed it upstream in nodejs/node#64004, Debian's 20 has not yet). The repair is the one
 * upstream discussed: a response the HTTP parser saw complete was not cut short. The pattern
 * must match exactly once, so a node-fetch that changed fails the build instead of shipping
 * unrepaired.
 */
export const PREMATURE_CLOSE_REPAIR = {
  from: "if (hasDataListener && !hadError) {",
  to: "if (hasDataListener && !hadError && !response.complete) {",
};

export const nodeFetchRepair: Plugin = {
  name: "liken-node-fetch-complete-response",
  setup(build) {
    build.onLoad({ filter: /[\\/]node-fetch[\\/]lib[\\/]index\.js$/ }, (args) => {
      const text = readFileSync(args.path, "utf8");
      const hits = text.split(PREMATURE_CLOSE_REPAIR.from).length - 1;
      if (hits !== 1) {
        throw new ImageError(
          "LIKEN_IMAGE_NODE_FETCH_CHANGED",
          `${args.path}: expected the premature-close check once, found it ${hits} times; node-fetch changed: see whether it still needs src/operator-image/bundle.ts's repair`,
        );
      }
      return {
        contents: text.replace(PREMATURE_CLOSE_REPAIR.from, PREMATURE_CLOSE_REPAIR.to),
        loader: "js",
      };
    });
  },
};

/**
 * esbuild options for the image: dependencies bundled; only what the image never runs stays
 * out (the build tools, ws's optional native speed-ups). CommonJS dependencies call
 * require(), which an ES module lacks: the banner defines it. The shebang makes the file the
 * `liken` command itself.
 */
export const IMAGE_BUNDLE: BuildOptions = {
  packages: "bundle",
  external: ["esbuild", "tsx", "tsx/*", "bufferutil", "utf-8-validate"],
  banner: {
    js: [
      "#!/usr/bin/node",
      'import { createRequire as likenCreateRequire } from "node:module";',
      "const require = likenCreateRequire(import.meta.url);",
    ].join("\n"),
  },
  legalComments: "none",
  plugins: [nodeFetchRepair],
};
