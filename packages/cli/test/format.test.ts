import { describe, expect, it } from "vitest";
import { money } from "../src/format.js";

describe("money: integer minor units shown with their currency", () => {
  it("usd: dollars and two-digit cents, a sign before the symbol, thousands grouped", () => {
    expect(money(2900, "usd")).toBe("$29.00");
    expect(money(7000, "usd")).toBe("$70.00");
    expect(money(5, "usd")).toBe("$0.05");
    expect(money(0, "usd")).toBe("$0.00");
    expect(money(-2900, "usd")).toBe("-$29.00");
    expect(money(-1, "usd")).toBe("-$0.01");
    expect(money(123456789, "usd")).toBe("$1,234,567.89");
    expect(money(100000, "USD")).toBe("$1,000.00");
  });

  it("the currency's own minor unit (ISO 4217): none for jpy, three for kwd", () => {
    expect(money(500, "jpy")).toBe("¥500");
    expect(money(1234, "kwd")).toBe("KWD 1.234");
    expect(money(5, "kwd")).toBe("KWD 0.005");
  });

  it("other currencies by their code; eur and gbp by their symbol", () => {
    expect(money(123456, "chf")).toBe("CHF 1,234.56");
    expect(money(-150, "eur")).toBe("-€1.50");
    expect(money(999, "gbp")).toBe("£9.99");
  });
});
