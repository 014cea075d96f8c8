/**
 * The Express (and Connect, and plain `node:http`) middleware of @latchkey/verify. It uses only
 * what Node.js's own request and response objects have, so it does not load Express.
 */
import { errorBodyOf, VerifyError } from './errors.js';
import type { Verifier, VerifiedToken } from './index.js';

/** The part of a request the middleware reads and writes (an Express `Request` has it). */
export interface AuthRequest {
  headers: { authorization?: string | undefined };
  /** Set by the middleware: the verified token. */
  auth?: VerifiedToken | null;
}

/** The part of a response the middleware uses (a `node:http` `ServerResponse` has it). */
export interface AuthResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body: string): unknown;
}

/**
 * Builds a middleware that requires a valid access token (`Authorization: Bearer`, RFC 6750
 * §2.1): on success it sets `req.auth` and calls `next()`; otherwise it answers 401 (503 when
 * the keys or the session check are unreachable) with the service's Error body
 * (docs/api.md#error-body) and does not call `next`. Errors other than a refused token go to
 * `next(err)`.
 */
export function latchkeyMiddleware(verifier: Verifier): (req: AuthRequest, res: AuthResponse, next: (err?: unknown) => void) => void {
  return (req, res, next) => {
    verifier.verifyAuthorization(req.headers.authorization).then(
      (auth) => {
        req.auth = auth;
        next();
      },
      (err: unknown) => {
        if (!(err instanceof VerifyError)) return next(err);
        res.statusCode = err.status;
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.setHeader('cache-control', 'no-store');
        res.end(JSON.stringify(errorBodyOf(err)));
      },
    );
  };
}
