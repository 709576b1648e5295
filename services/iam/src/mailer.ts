import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import nodemailer from "nodemailer";
import type { Logger } from "@core/kit";

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(mail: Mail): Promise<void>;
}

/**
 * Mail for magic links and invitations: SMTP when `SMTP_URL` is set (nodemailer), otherwise each
 * message goes to `CORE_DATA_DIR/outbox/` so a developer on the embedded default can follow the
 * link. The log line names the file, never the link: the link is a credential.
 */
export function createMailer(options: { smtpUrl?: string; from: string; outboxDir: string; logger: Logger }): Mailer {
  if (options.smtpUrl) {
    const transport = nodemailer.createTransport(options.smtpUrl);
    return {
      async send(mail) {
        await transport.sendMail({ from: options.from, to: mail.to, subject: mail.subject, text: mail.text });
        options.logger.info({ to: mail.to, subject: mail.subject }, "mail sent");
      },
    };
  }
  return {
    async send(mail) {
      mkdirSync(options.outboxDir, { recursive: true, mode: 0o700 });
      const safeTo = mail.to.replace(/[^a-zA-Z0-9@._-]/g, "_");
      const file = join(options.outboxDir, `${new Date().toISOString().replace(/[:.]/g, "-")}-${safeTo}.txt`);
      const body = `From: ${options.from}\nTo: ${mail.to}\nSubject: ${mail.subject}\n\n${mail.text}\n`;
      writeFileSync(file, body, { mode: 0o600 });
      options.logger.info({ to: mail.to, subject: mail.subject, file }, "mail written to the outbox (no SMTP_URL set)");
    },
  };
}
