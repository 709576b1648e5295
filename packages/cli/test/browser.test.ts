import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { browserOpener } from "../src/browser.js";
import { removeScratchDirs, scratchDir } from "./support/cli.js";

/** Which program `core login` would open the device page with, per platform and environment. */
describe("browserOpener", () => {
  afterAll(() => removeScratchDirs());

  it("macOS: open; Windows: rundll32's URL handler (no cmd.exe quoting)", () => {
    expect(browserOpener({}, "darwin")).toEqual({ opener: { file: "open", args: [] } });
    expect(browserOpener({}, "win32")).toEqual({ opener: { file: "rundll32", args: ["url.dll,FileProtocolHandler"] } });
  });

  it("Linux: xdg-open from PATH, only with a graphical session", () => {
    const bin = scratchDir("bin");
    writeFileSync(join(bin, "xdg-open"), "#!/bin/sh\n", { mode: 0o755 });
    const empty = scratchDir("bin");
    expect(browserOpener({ DISPLAY: ":0", PATH: `${empty}:${bin}` }, "linux")).toEqual({ opener: { file: join(bin, "xdg-open"), args: [] } });
    expect(browserOpener({ WAYLAND_DISPLAY: "wayland-0", PATH: bin }, "linux")).toEqual({ opener: { file: join(bin, "xdg-open"), args: [] } });
    expect(browserOpener({ PATH: bin }, "linux")).toEqual({ unavailable: "no graphical session (DISPLAY, WAYLAND_DISPLAY)" });
    expect(browserOpener({ DISPLAY: ":0", PATH: empty }, "linux")).toEqual({ unavailable: "xdg-open is not installed" });
  });

  it("a non-executable xdg-open is not one", () => {
    const bin = scratchDir("bin");
    writeFileSync(join(bin, "xdg-open"), "#!/bin/sh\n", { mode: 0o644 });
    expect(browserOpener({ DISPLAY: ":0", PATH: bin }, "linux")).toEqual({ unavailable: "xdg-open is not installed" });
  });

  it("BROWSER wins on every platform, split into a program and its arguments", () => {
    expect(browserOpener({ BROWSER: "firefox" }, "linux")).toEqual({ opener: { file: "firefox", args: [] } });
    expect(browserOpener({ BROWSER: " firefox  --new-window %s " }, "darwin")).toEqual({ opener: { file: "firefox", args: ["--new-window", "%s"] } });
    expect(browserOpener({ BROWSER: "" }, "darwin")).toEqual({ opener: { file: "open", args: [] } });
  });

  it("never in CI or when switched off, BROWSER or not; CI=false and CORE_NO_BROWSER=0 do not count", () => {
    expect(browserOpener({ CI: "true", BROWSER: "firefox" }, "darwin")).toEqual({ unavailable: "CI is set" });
    expect(browserOpener({ CI: "1" }, "darwin")).toEqual({ unavailable: "CI is set" });
    expect(browserOpener({ CORE_NO_BROWSER: "1", BROWSER: "firefox" }, "darwin")).toEqual({ unavailable: "CORE_NO_BROWSER is set" });
    expect(browserOpener({ CI: "false" }, "darwin")).toEqual({ opener: { file: "open", args: [] } });
    expect(browserOpener({ CORE_NO_BROWSER: "0", CI: "" }, "darwin")).toEqual({ opener: { file: "open", args: [] } });
  });
});
