// Debian's Chromium, headless, driven by playwright-core from the directory
// named in CAIRN_PLAYWRIGHT_DIR (`.ci/run` installs it there, pinned): the
// one place the browser tests launch it. `extraArgs` adds flags (the
// attacker's page maps a rebinding domain).
import { createRequire } from "node:module";

export const require = createRequire(process.env.CAIRN_PLAYWRIGHT_DIR + "/");
const { chromium } = require("playwright-core");

export function launch(extraArgs = []) {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
           ...extraArgs],
  });
}
