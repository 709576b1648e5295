/**
 * A read from another service, asked once more when the request fails at once: a kept-alive
 * connection the other side closed just as it was reused is no outage, and a read is safe to repeat.
 * A timeout is not asked again (the caller's bound holds); the second failure is the one thrown.
 * `ask` makes the whole request each time, with a fresh timeout signal.
 */
export async function readAgainOnReset(ask: () => Promise<Response>): Promise<Response> {
  try {
    return await ask();
  } catch (err) {
    if (isTimeout(err)) throw err;
    return ask();
  }
}

function isTimeout(err: unknown): boolean {
  const name = (err as Error | undefined)?.name;
  return name === "TimeoutError" || name === "AbortError";
}
