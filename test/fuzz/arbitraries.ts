import fc from "fast-check";

/** The part of JSON Schema (OpenAPI 3.1) the committed descriptions use. */
export interface Schema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, Schema>;
  required?: string[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  nullable?: boolean;
}

export type Components = Record<string, Schema>;

/**
 * Inputs that have broken services (issue 10) and inputs no service should break on: U+0000, other
 * control characters, lone surrogates, over-long and empty strings, wrong types, huge and negative
 * numbers, deep nesting. Any of them may stand in for any value.
 */
const hostileStrings = fc.constantFrom(
  "\u0000",
  "a\u0000b",
  "\u0001\u0002\u001b[31m\u007f",
  "line\r\nbreak\ttab",
  "\ud800",
  "x\udfff",
  "\u202eevil",
  "",
  " ",
  "%00",
  "../../etc/passwd",
  "'; drop table users; --",
  "😀".repeat(300),
  "x".repeat(129),
  "x".repeat(1025),
  "y".repeat(70_000),
  "9223372036854775807",
  "-1",
  "1e300",
  "null",
  "2026-02-31T00:00:00.000Z",
  "+275760-09-13T00:00:00.000Z",
);

const deeply = (levels: number): unknown => {
  let value: unknown = {};
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
};

const hostileNumbers = fc.constantFrom(-1, 0, 1.5, 1e300, -1e300, 2 ** 53 + 2, 9223372036854775807, 99_999_999_999, 100_000_000_000, Number.MAX_SAFE_INTEGER);

/** Values of the wrong type or shape for almost any field. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: hostileStrings },
  { weight: 2, arbitrary: hostileNumbers },
  { weight: 2, arbitrary: fc.constantFrom(null, true, false, [], {}, [null], { "\u0000": 1 }, ["\u0000"]) },
  // deeper values go as raw text (openapi-fuzz.test.ts): JSON.stringify itself overflows on them
  { weight: 1, arbitrary: fc.constant(deeply(70)) },
  { weight: 1, arbitrary: fc.constant(Array.from({ length: 10_000 }, (_, i) => i)) },
);

/** Text for a path segment or query value: hostile strings, and what a fuzzer tries on cursors. */
export const hostileText: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: hostileStrings },
  { weight: 2, arbitrary: editedCursor() },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
);

/** Cursors whose decoded position is edited: keys of the wrong kind, out of range, or holding U+0000. */
function editedCursor(): fc.Arbitrary<string> {
  const b64 = (text: string) => Buffer.from(text).toString("base64url");
  return fc.constantFrom(
    b64('{"k":"abc","id":"x"}'),
    b64('{"k":1e300,"id":"x"}'),
    b64('{"k":9223372036854775807,"id":9223372036854775807}'),
    b64('{"k":"+275760-09-13T00:00:00.000Z","id":"x"}'),
    b64('{"k":"2026-01-01T00:00:00.000Z","id":"a\\u0000b"}'),
    b64('{"k":1,"id":1}'),
    b64("[1,2]"),
    b64("null"),
    "not-a-cursor!",
  );
}

/** Resolves `#/components/schemas/X`. */
export function resolve(schema: Schema, components: Components): Schema {
  let current = schema;
  for (let i = 0; current.$ref && i < 10; i++) current = components[current.$ref.replace("#/components/schemas/", "")] ?? {};
  return current;
}

/**
 * Values that fit a schema, mostly: the shape a client would send, so requests get past the first
 * check and reach deeper code. Unknown keywords are ignored; depth is bounded.
 */
export function valueOf(schema: Schema, components: Components, depth = 0): fc.Arbitrary<unknown> {
  const s = resolve(schema, components);
  if (depth > 6) return fc.constant(null);
  if (s.const !== undefined) return fc.constant(s.const);
  if (s.enum) return fc.constantFrom(...s.enum);
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives?.length) return fc.oneof(...alternatives.map((a) => valueOf(a, components, depth + 1)));
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : s.properties ? ["object"] : [];
  if (types.length === 0) return fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.boolean(), fc.constant(null));
  const options = types.map((type) => valueOfType(type, s, components, depth));
  if (s.nullable) options.push(fc.constant(null));
  return options.length === 1 ? options[0]! : fc.oneof(...options);
}

function valueOfType(type: string, s: Schema, components: Components, depth: number): fc.Arbitrary<unknown> {
  switch (type) {
    case "string":
      return stringOf(s);
    case "integer":
      return fc.integer({ min: Math.ceil(s.minimum ?? (s.exclusiveMinimum ?? -1000) + 1), max: Math.floor(Math.min(s.maximum ?? 1_000_000, Number.MAX_SAFE_INTEGER)) });
    case "number":
      return fc.double({ min: s.minimum ?? -1000, max: Math.min(s.maximum ?? 1_000_000, 1e15), noNaN: true, noDefaultInfinity: true });
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "array":
      return fc.array(valueOf(s.items ?? {}, components, depth + 1), { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 3, 3) });
    case "object":
      return objectOf(s, components, depth);
    default:
      return fc.constant(null);
  }
}

function stringOf(s: Schema): fc.Arbitrary<string> {
  if (s.format === "email") return fc.emailAddress();
  if (s.format === "uri" || s.format === "url") return fc.webUrl();
  if (s.pattern) {
    try {
      const max = s.maxLength ?? 64;
      return fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length >= (s.minLength ?? 0) && v.length <= max);
    } catch {
      // a pattern fast-check cannot invert: plain strings
    }
  }
  return fc.string({ minLength: s.minLength ?? 0, maxLength: Math.min(s.maxLength ?? 24, 24) });
}

function objectOf(s: Schema, components: Components, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = s.properties ?? {};
  const required = new Set(s.required ?? []);
  const entries = Object.entries(properties).map(([name, child]) => [name, valueOf(child, components, depth + 1)] as const);
  if (entries.length === 0) return fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 });
  return fc.record(Object.fromEntries(entries), { requiredKeys: [...required].filter((k) => k in properties) });
}

/**
 * A value of the schema with one part replaced by a hostile value: the whole value, one of its
 * fields, or a field it does not know.
 */
export function hostileVariantOf(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.tuple(valid, hostileValue, fc.nat(), fc.constantFrom("replace-field", "add-field", "whole")).map(([value, hostile, pick, how]) => {
    if (how === "whole" || typeof value !== "object" || value === null || Array.isArray(value)) return how === "whole" ? hostile : value;
    const copy = { ...(value as Record<string, unknown>) };
    const keys = Object.keys(copy);
    if (how === "replace-field" && keys.length > 0) copy[keys[pick % keys.length]!] = hostile;
    else copy[["unexpected", "\u0000", "x".repeat(200)][pick % 3]!] = hostile;
    return copy;
  });
}
