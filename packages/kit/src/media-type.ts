const JSON_MEDIA = /^application\/([\w.-]+\+)?json$/i;

/** The media type of a Content-Type, without its parameters (`application/json; charset=utf-8` → `application/json`). */
export const mediaTypeOf = (contentType: string | undefined): string => (contentType ?? "").split(";")[0]!.trim();

/** Whether a Content-Type names JSON (`application/json`, `application/…+json`, any parameters). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  return JSON_MEDIA.test(mediaTypeOf(contentType));
}
