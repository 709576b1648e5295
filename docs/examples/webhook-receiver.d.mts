/** Checks a Core-Signature header for a raw body; null when it verifies, else why not. */
export function verifyCoreSignature(secret: string, header: string | undefined, body: string, nowSeconds?: number, toleranceSeconds?: number): string | null;
