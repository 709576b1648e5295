import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@core/kit";
import { Writable } from "node:stream";
import { createMailer } from "@core/kit";

/** A logger whose lines the test can read. */
function capturedLogger() {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) });
  return { logger: createLogger("iam", "info", sink as never), lines };
}

describe("mailer over SMTP (SMTP_URL)", () => {
  const received: { from: string; to: string[]; data: string }[] = [];
  let server: SMTPServer;
  let port: number;

  beforeAll(async () => {
    server = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      onData(stream, session, callback) {
        let data = "";
        stream.on("data", (d) => (data += d));
        stream.on("end", () => {
          received.push({ from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", to: session.envelope.rcptTo.map((r) => r.address), data });
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    port = (server.server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("delivers the message to the SMTP server and logs that it went, not to whom, its subject or its body", async () => {
    const { logger, lines } = capturedLogger();
    const mailer = createMailer({ smtpUrl: `smtp://127.0.0.1:${port}`, from: "Core <no-reply@core.test>", outboxDir: "/nonexistent", logger });
    await mailer.send({ to: "ada@example.com", subject: "Your link", text: "open https://iam/verify?token=SECRET-TOKEN" });
    expect(received).toHaveLength(1);
    expect(received[0]!.to).toEqual(["ada@example.com"]);
    expect(received[0]!.data).toContain("SECRET-TOKEN");
    await new Promise((r) => setTimeout(r, 20));
    expect(lines.join("")).toContain("mail sent");
    expect(lines.join("")).toContain("example.com");
    for (const personal of ["SECRET-TOKEN", "ada@example.com", "Your link"]) expect(lines.join("")).not.toContain(personal);
  });

  it("fails loudly when the SMTP server cannot be reached", async () => {
    const { logger } = capturedLogger();
    const mailer = createMailer({ smtpUrl: "smtp://127.0.0.1:1", from: "x@core.test", outboxDir: "/nonexistent", logger });
    await expect(mailer.send({ to: "a@example.com", subject: "s", text: "t" })).rejects.toThrow();
  });
});

describe("mailer without SMTP (the outbox)", () => {
  it("names outbox files so the folder lists mails in the order they were written, however fast they come", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "core-outbox-")), "outbox");
    const mailer = createMailer({ from: "Core <no-reply@localhost>", outboxDir: dir, logger: capturedLogger().logger });
    for (let n = 1; n <= 20; n++) await mailer.send({ to: "bob@example.com", subject: `Mail ${n}`, text: "." });
    const subjects = readdirSync(dir)
      .sort()
      .map((name) => /^Subject: (.*)$/m.exec(readFileSync(join(dir, name), "utf8"))![1]);
    expect(subjects).toEqual(Array.from({ length: 20 }, (_, i) => `Mail ${i + 1}`));
  });

  it("writes each message to the outbox with mode 0600 and logs the folder, not the address or the link", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "core-outbox-")), "outbox");
    const { logger, lines } = capturedLogger();
    const mailer = createMailer({ from: "Core <no-reply@localhost>", outboxDir: dir, logger });
    await mailer.send({ to: "bob@example.com", subject: "Invited", text: "accept with SECRET-LINK" });
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    const file = join(dir, files[0]!);
    expect(readFileSync(file, "utf8")).toMatch(/To: bob@example.com[\s\S]*accept with SECRET-LINK/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    await new Promise((r) => setTimeout(r, 20));
    expect(lines.join("")).toContain(dir);
    for (const personal of ["SECRET-LINK", "bob@example.com", "Invited"]) expect(lines.join("")).not.toContain(personal);
  });
});
