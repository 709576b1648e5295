import { describe, expect, it } from "vitest";
import { decimalMoney, money } from "../src/format.js";

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

describe("decimalMoney: a unit price in decimal minor units, exactly (DESIGN §6.2)", () => {
  it("fractions of a cent keep every digit; whole prices show the currency's decimals", () => {
    expect(decimalMoney("0.004", "usd")).toBe("$0.00004");
    expect(decimalMoney("0.000000000001", "usd")).toBe("$0.00000000000001");
    expect(decimalMoney("2900", "usd")).toBe("$29.00");
    expect(decimalMoney("2900.000", "usd")).toBe("$29.00");
    expect(decimalMoney("5", "usd")).toBe("$0.05");
    expect(decimalMoney("0", "usd")).toBe("$0.00");
    expect(decimalMoney("150000.5", "usd")).toBe("$1,500.005");
    expect(decimalMoney("-2900", "usd")).toBe("-$29.00");
    expect(decimalMoney("-0.000", "usd")).toBe("$0.00");
  });

  it("the currency's minor unit: jpy has none, kwd three", () => {
    expect(decimalMoney("500", "jpy")).toBe("¥500");
    expect(decimalMoney("0.5", "jpy")).toBe("¥0.5");
    expect(decimalMoney("1234", "kwd")).toBe("KWD 1.234");
    expect(decimalMoney("1.25", "eur")).toBe("€0.0125");
  });

  it("what is not a decimal is shown as it came", () => {
    expect(decimalMoney("1e3", "usd")).toBe("1e3 USD minor units");
  });
});
