// The `core` executable (bin in packages/cli/package.json). Everything lives in cli.ts; this file
// only connects it to the process.
import { run } from "./cli.js";

// `core token | head -c 10` closes the pipe early: that is not an error worth a stack trace
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw err;
});

/** The first line of standard input, then stdin is let go so the process can exit. */
function readStdinLine(prompt: string): Promise<string> {
  const stdin = process.stdin;
  if (stdin.isTTY) process.stderr.write(`${prompt} `);
  return new Promise((resolve, reject) => {
    let text = "";
    const finish = () => {
      stdin.off("data", onData);
      stdin.destroy();
      resolve(text.split(/\r?\n/)[0] ?? "");
    };
    const onData = (chunk: string) => {
      text += chunk;
      if (text.includes("\n")) finish();
    };
    stdin.setEncoding("utf8");
    stdin.on("data", onData);
    stdin.once("end", finish);
    stdin.once("error", reject);
  });
}

/** Resolves when Enter is pressed; either way standard input is let go once it is no longer needed. */
function waitForEnter(): { pressed: Promise<void>; cancel(): void } {
  const stdin = process.stdin;
  let release = () => {};
  const pressed = new Promise<void>((resolve) => {
    const onData = (chunk: string) => {
      if (!/[\r\n]/.test(chunk)) return;
      release();
      resolve();
    };
    release = () => {
      stdin.off("data", onData);
      stdin.destroy();
    };
    stdin.setEncoding("utf8");
    stdin.on("data", onData);
  });
  return { pressed, cancel: () => release() };
}

process.exitCode = await run(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(`${text}\n`),
  stderr: (text) => process.stderr.write(`${text}\n`),
  readStdinLine,
  waitForEnter,
  interactive: process.stdin.isTTY === true,
  env: process.env,
});
