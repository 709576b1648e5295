import { ApiError } from "@core/kit";

/**
 * Every error code of the stack registry beyond the shared ones of DESIGN §3 (401, 403, 400
 * VALIDATION_ERROR), one distinct code per publish failure (issue 4). See ADR 0010.
 */
export const STACK_ERRORS = {
  TEMPLATE_NOT_FOUND: 404,
  VERSION_NOT_FOUND: 404,
  TEMPLATE_EXISTS: 409,
  VERSION_EXISTS: 409,
  TEMPLATE_DEPRECATED: 409,
  PAYLOAD_TOO_LARGE: 413,
} as const;

type StackErrorCode = keyof typeof STACK_ERRORS;

const stackError = (code: StackErrorCode, message: string, details: unknown = null) =>
  new ApiError(STACK_ERRORS[code], code, message, details);

export const templateNotFound = (name: string) => stackError("TEMPLATE_NOT_FOUND", `No stack template named "${name}"`);
export const versionNotFound = (name: string, version: string) =>
  stackError("VERSION_NOT_FOUND", `Stack template "${name}" has no version ${version}`);
export const templateExists = (name: string) => stackError("TEMPLATE_EXISTS", `A stack template named "${name}" already exists`);
export const versionExists = (name: string, version: string) =>
  stackError("VERSION_EXISTS", `Version ${version} of "${name}" is already published; published versions are immutable`);
export const templateDeprecated = (name: string) =>
  stackError("TEMPLATE_DEPRECATED", `Stack template "${name}" is deprecated; reactivate it before publishing`);
export const definitionTooLarge = (bytes: number, limit: number) =>
  stackError("PAYLOAD_TOO_LARGE", `stackDefinition is ${bytes} bytes serialized; the limit is ${limit}`, {
    path: "stackDefinition",
    bytes,
    limit,
  });
