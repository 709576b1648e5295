import PDFDocument from "pdfkit";
import { invoiceDocument, type InvoiceView } from "./pages/invoice-document.js";

/**
 * Windows-1252 beyond Latin-1: what the PDF's standard fonts (Helvetica) can show besides U+0000–U+00FF.
 * Other characters (a name in another script) are shown as "?": the standard fonts need no font file
 * in the deployment, and every Latin-script name, address and currency symbol we print fits.
 */
const WIN_ANSI_EXTRA = new Set("€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ");
const printable = (text: string) =>
  [...text].map((ch) => (ch.codePointAt(0)! <= 0xff || WIN_ANSI_EXTRA.has(ch) ? ch : "?")).join("").replace(/[\u0000-\u001f\u007f-\u009f]/g, " ");

const A4 = { width: 595.28, height: 841.89 };
const MARGIN = 50;
const FONT = "Helvetica";
const BOLD = "Helvetica-Bold";

/**
 * `GET /invoices/{id}/pdf` (DESIGN §6.11): the invoice as a PDF, made in process with pdfkit (no
 * browser at request time), laying out the same document as the HTML page (`invoiceDocument`).
 * Deterministic for one invoice: its dates, not the time of the request, are in the file.
 */
export function invoicePdf(invoice: InvoiceView): Promise<Buffer> {
  const d = invoiceDocument(invoice);
  const doc = new PDFDocument({
    size: "A4",
    margin: MARGIN,
    info: { Title: printable(d.title), Author: printable(invoice.seller?.name ?? "Core"), CreationDate: new Date((invoice.finalizedAt ?? invoice.createdAt) * 1000) },
    pdfVersion: "1.7",
  });
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on("data", (chunk: Buffer) => chunks.push(chunk));
    doc.on("end", () => resolve(Buffer.concat(chunks)));
    doc.on("error", reject);
  });
  const width = A4.width - 2 * MARGIN;
  const text = (value: string, x: number, y: number, options: PDFKit.Mixins.TextOptions = {}) => doc.text(printable(value), x, y, options);

  doc.font(BOLD).fontSize(18);
  text(d.title, MARGIN, MARGIN);
  doc.font(FONT).fontSize(10).fillColor("#444444");
  text(d.status, MARGIN, doc.y + 2);
  doc.fillColor("#000000");

  // the parties side by side: from (seller) and billed to (buyer)
  const partiesTop = doc.y + 16;
  const column = width / 2 - 10;
  let bottom = partiesTop;
  const party = (heading: string, lines: string[], x: number) => {
    doc.font(BOLD).fontSize(10);
    text(heading, x, partiesTop, { width: column });
    doc.font(FONT);
    for (const line of lines) text(line, x, doc.y + 1, { width: column });
    bottom = Math.max(bottom, doc.y);
  };
  if (d.seller.length > 0) party("From", d.seller, MARGIN);
  party("Billed to", d.buyer, d.seller.length > 0 ? MARGIN + width / 2 + 10 : MARGIN);

  // the facts: number, status, dates
  let y = bottom + 16;
  for (const [label, value] of d.facts) {
    doc.font(BOLD);
    text(label, MARGIN, y, { width: 110 });
    doc.font(FONT);
    text(value, MARGIN + 115, y, { width: width - 115 });
    y = doc.y + 2;
  }

  // the lines: description, quantity, unit price, tax rate, amount
  const cols = [
    { x: MARGIN, w: 215, align: "left" as const },
    { x: MARGIN + 220, w: 60, align: "right" as const },
    { x: MARGIN + 285, w: 80, align: "right" as const },
    { x: MARGIN + 370, w: 45, align: "right" as const },
    { x: MARGIN + 420, w: width - 420, align: "right" as const },
  ];
  const ensureRoom = (needed: number) => {
    if (y + needed > A4.height - MARGIN) {
      doc.addPage();
      y = MARGIN;
    }
  };
  y += 14;
  doc.font(BOLD);
  d.columns.forEach((name, i) => text(name, cols[i]!.x, y, { width: cols[i]!.w, align: cols[i]!.align }));
  y = doc.y + 3;
  doc.moveTo(MARGIN, y).lineTo(MARGIN + width, y).lineWidth(0.5).stroke();
  y += 4;
  doc.font(FONT);
  for (const line of d.lines) {
    const description = line.detail ? `${line.description}\n${line.detail}` : line.description;
    const height = Math.max(doc.heightOfString(printable(description), { width: cols[0]!.w }), 12);
    ensureRoom(height + 6);
    text(description, cols[0]!.x, y, { width: cols[0]!.w });
    [line.quantity, line.unitPrice, line.taxRate, line.amount].forEach((value, i) => text(value, cols[i + 1]!.x, y, { width: cols[i + 1]!.w, align: "right" }));
    y += height + 6;
  }
  doc.moveTo(MARGIN, y).lineTo(MARGIN + width, y).lineWidth(0.5).stroke();
  y += 6;

  // the totals, right-aligned under the amounts
  for (const [label, value] of d.totals) {
    ensureRoom(14);
    const strong = label === "Total" || label === "Amount due";
    doc.font(strong ? BOLD : FONT);
    text(label, MARGIN, y, { width: cols[4]!.x - MARGIN - 5, align: "right" });
    text(value, cols[4]!.x, y, { width: cols[4]!.w, align: "right" });
    y = doc.y + 3;
  }
  doc.font(FONT).fontSize(9);
  y += 10;
  for (const note of d.notes) {
    ensureRoom(24);
    text(note, MARGIN, y, { width });
    y = doc.y + 4;
  }
  doc.end();
  return done;
}
