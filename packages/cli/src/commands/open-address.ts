import { openInBrowser, type Opener } from "../browser.js";
import type { Context } from "../context.js";

/** What `core login` and `core billing portal` say when Enter opens the address. */
export const PRESS_ENTER = "Press Enter to open it in your browser.";

/**
 * How an address can be opened in a browser here, or null: never without a terminal to press Enter
 * on, with `--no-browser`, in CI or under CORE_NO_BROWSER (CORE_DEBUG says why not).
 */
export function browserToOffer(ctx: Context, mayOffer: boolean): Opener | null {
  const opener = mayOffer && ctx.interactive && "opener" in ctx.browser ? ctx.browser.opener : null;
  if (!opener) {
    const why = !mayOffer ? "--no-browser" : !ctx.interactive ? "standard input is not a terminal" : "unavailable" in ctx.browser ? ctx.browser.unavailable : "";
    ctx.debug(`not offering to open a browser: ${why}`);
  }
  return opener;
}

/** Opens `url` with `opener`, and says whether it did. */
export async function openAddress(ctx: Context, opener: Opener, url: string): Promise<void> {
  const failed = await openInBrowser(opener, url);
  if (failed) ctx.warn(`Could not open a browser (${failed}): open the address yourself.`);
  else ctx.say("Opened the address in your browser.");
}
