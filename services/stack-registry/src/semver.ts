import semver from "semver";

/** Spec §9: three numbers separated by dots, an optional hyphen suffix of letters, digits and dots. */
export const SEMVER_PATTERN = /^[0-9]+[.][0-9]+[.][0-9]+(-[a-zA-Z0-9.]+)?$/;

const NUMBER = "(0|[1-9][0-9]*)";
const IDENTIFIER = "(0|[1-9][0-9]*|[0-9]*[A-Za-z][A-Za-z0-9]*)";
/**
 * The spec §9 pattern narrowed by semver.org's rules, as the descriptions publish it: no leading
 * zeros in numbers or numeric pre-release identifiers, no empty identifiers.
 */
export const STRICT_SEMVER_PATTERN = new RegExp(`^${NUMBER}\\.${NUMBER}\\.${NUMBER}(-${IDENTIFIER}(\\.${IDENTIFIER})*)?$`);

/** Versions are short; bounded so junk never reaches the database (ADR 0010). */
export const MAX_VERSION_LENGTH = 64;

/**
 * A version string we accept: the spec §9 pattern, and valid by semver.org too, which the pattern
 * alone lets through (leading zeros `01.0.0`, `1.0.0-01`; empty identifiers `1.0.0-a..b`, `1.0.0-a.`).
 * Without build metadata (the pattern has no `+`), equal precedence means equal strings, so the
 * unique index on the string is uniqueness by precedence.
 */
export function isStackVersion(value: string): boolean {
  return value.length <= MAX_VERSION_LENGTH && SEMVER_PATTERN.test(value) && semver.valid(value) === value;
}

/** semver.org §11 precedence: pre-releases below their release, numeric identifiers as numbers. */
export const compareVersions = (a: string, b: string): number => semver.compare(a, b);

export const isPrerelease = (version: string): boolean => semver.prerelease(version) !== null;

/** Highest precedence first, as the versions list shows them. */
export const byPrecedenceDescending = <T extends { version: string }>(list: T[]): T[] =>
  [...list].sort((a, b) => compareVersions(b.version, a.version));

/**
 * The latest of a template's versions (DESIGN §7): the highest non-deprecated release, or, when
 * there is no release, the highest non-deprecated pre-release; undefined when nothing qualifies.
 */
export function latestOf<T extends { version: string; status: string }>(list: T[]): T | undefined {
  const live = byPrecedenceDescending(list.filter((v) => v.status !== "deprecated"));
  return live.find((v) => !isPrerelease(v.version)) ?? live[0];
}
