/** Where a request comes from; recorded on the device and session, and named in security notices and logs. */
export interface ClientContext {
  readonly ip: string | null;
  readonly userAgent: string | null;
}

/** The {@link ClientContext} of a request: its client address (`TRUST_PROXY` applied) and `User-Agent`. */
export function clientContextOf(request: { readonly ip: string | undefined; readonly headers: { readonly 'user-agent'?: string | undefined } }): ClientContext {
  return { ip: request.ip ?? null, userAgent: request.headers['user-agent'] ?? null };
}
