/** Time comes from an injected clock so expiry rules are testable (STYLE.md). */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export const unixSeconds = (date: Date): number => Math.floor(date.getTime() / 1000);

/** A clock tests can move by hand. */
export function manualClock(start = new Date("2026-01-01T00:00:00Z")): Clock & { advance(ms: number): void; set(d: Date): void } {
  let current = start.getTime();
  return {
    now: () => new Date(current),
    advance: (ms) => {
      current += ms;
    },
    set: (d) => {
      current = d.getTime();
    },
  };
}
