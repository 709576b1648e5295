import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

/** A program that opens an address in the person's browser: `file …args <url>`. */
export interface Opener {
  file: string;
  args: string[];
}

/**
 * How `core login` can open the device page, or why it will not offer to (for `CORE_DEBUG`).
 * Never in CI or when switched off; `BROWSER` (the common convention: a command, `%s` for the
 * address) wins; else the platform's own opener, on Linux only with a graphical session.
 */
export function browserOpener(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): { opener: Opener } | { unavailable: string } {
  if (isSet(env.CORE_NO_BROWSER)) return { unavailable: "CORE_NO_BROWSER is set" };
  if (isSet(env.CI)) return { unavailable: "CI is set" };
  const custom = env.BROWSER?.trim();
  if (custom) {
    const [file, ...args] = custom.split(/\s+/);
    return { opener: { file: file!, args } };
  }
  if (platform === "darwin") return { opener: { file: "open", args: [] } };
  // rundll32 hands the address to the default browser without cmd.exe, whose quoting & would break
  if (platform === "win32") return { opener: { file: "rundll32", args: ["url.dll,FileProtocolHandler"] } };
  if (!env.DISPLAY && !env.WAYLAND_DISPLAY) return { unavailable: "no graphical session (DISPLAY, WAYLAND_DISPLAY)" };
  const xdgOpen = onPath("xdg-open", env.PATH);
  return xdgOpen ? { opener: { file: xdgOpen, args: [] } } : { unavailable: "xdg-open is not installed" };
}

/** Starts the opener, detached; answers null once it runs, or why it could not start. */
export function openInBrowser(opener: Opener, url: string): Promise<string | null> {
  const hasPlaceholder = opener.args.some((arg) => arg.includes("%s"));
  const args = hasPlaceholder ? opener.args.map((arg) => arg.replaceAll("%s", url)) : [...opener.args, url];
  return new Promise((resolve) => {
    const child = spawn(opener.file, args, { detached: true, stdio: "ignore" });
    child.once("error", (err: NodeJS.ErrnoException) => resolve(`${opener.file}: ${err.code ?? err.message}`));
    child.once("spawn", () => {
      child.unref();
      resolve(null);
    });
  });
}

/** Set, and not an explicit no (`CI=false`, `CORE_NO_BROWSER=0`). */
function isSet(value: string | undefined): boolean {
  return value !== undefined && value !== "" && value !== "0" && value.toLowerCase() !== "false";
}

function onPath(program: string, path: string | undefined): string | null {
  for (const dir of (path ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, program);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}
