import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import nodemailer from "nodemailer";
import type { CommonConfig } from "./config.js";
import type { Logger } from "./logger.js";

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(mail: Mail): Promise<void>;
}

export interface MailConfig {
  /** SMTP_URL: mail goes out over SMTP; unset, it is written to the outbox folder */
  smtpUrl: string | undefined;
  /** CORE_MAIL_FROM */
  from: string;
  /** CORE_DATA_DIR/outbox */
  outboxDir: string;
}

/** The mail settings every service shares (README "Configuration"). */
export function mailConfig(common: Pick<CommonConfig, "dataDir">, env: NodeJS.ProcessEnv): MailConfig {
  return { smtpUrl: env.SMTP_URL || undefined, from: env.CORE_MAIL_FROM || "Core <no-reply@localhost>", outboxDir: join(common.dataDir, "outbox") };
}

/** The domain of a mail address, which the log may carry (the mailbox is personal data). */
const mailDomainOf = (address: string) => address.slice(address.lastIndexOf("@") + 1).toLowerCase().slice(0, 253);

/** The last outbox file name's time in this process (milliseconds). */
let lastStamp = 0;

/**
 * An outbox file name's time: the wall clock, moved on a millisecond when mails come faster, so the
 * folder lists in the order the mails were written (`ls`, `tail -1`) and no two share a name.
 */
function outboxStamp(): string {
  lastStamp = Math.max(Date.now(), lastStamp + 1);
  return new Date(lastStamp).toISOString().replace(/[:.]/g, "-");
}

/**
 * Mail of every service (IAM's magic links and invitations, billing's usage alerts): SMTP when
 * `SMTP_URL` is set (nodemailer), otherwise each message goes to `CORE_DATA_DIR/outbox/` so a
 * developer on the embedded default can read it. The log line says a mail went and to which mail
 * domain, never to whom, its subject or its body: an address and a subject are personal data (an
 * invitation's names the inviter), and a link in the body may be a credential
 * (docs/vault/cross-cutting/observability.md).
 */
export function createMailer(options: { smtpUrl?: string; from: string; outboxDir: string; logger: Logger }): Mailer {
  if (options.smtpUrl) {
    const transport = nodemailer.createTransport(options.smtpUrl);
    return {
      async send(mail) {
        await transport.sendMail({ from: options.from, to: mail.to, subject: mail.subject, text: mail.text });
        options.logger.info({ toDomain: mailDomainOf(mail.to) }, "mail sent");
      },
    };
  }
  return {
    async send(mail) {
      mkdirSync(options.outboxDir, { recursive: true, mode: 0o700 });
      const safeTo = mail.to.replace(/[^a-zA-Z0-9@._-]/g, "_");
      const stem = join(options.outboxDir, `${outboxStamp()}-${safeTo}`);
      const body = `From: ${options.from}\nTo: ${mail.to}\nSubject: ${mail.subject}\n\n${mail.text}\n`;
      // two processes writing to one address in one millisecond (two replicas) each get a file: never overwritten
      let file = `${stem}.txt`;
      for (let n = 2; ; n++) {
        try {
          writeFileSync(file, body, { mode: 0o600, flag: "wx" });
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
          file = `${stem}-${n}.txt`;
        }
      }
      options.logger.info({ toDomain: mailDomainOf(mail.to), outbox: options.outboxDir }, "mail written to the outbox (no SMTP_URL set)");
    },
  };
}
