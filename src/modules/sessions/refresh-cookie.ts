import { serviceCookie } from '../../plugins/service-cookie.js';

/** Cookie name (docs/api.md#refresh-cookie). */
export const REFRESH_COOKIE = 'refresh_token';
/** Cookie path: the browser sends the refresh token to the refresh endpoint only (docs/api.md#refresh-cookie). */
export const REFRESH_COOKIE_PATH = '/auth/v0/refresh';
/** The cookie that binds an identity provider's flow to the browser that started it (docs/api.md#authorize). */
export const OAUTH_FLOW_COOKIE = 'oauth_flow';
/** Its path: the browser sends it to the provider routes (the callback reads it). */
export const OAUTH_FLOW_COOKIE_PATH = '/auth/v0/oauth';

const refreshCookie = serviceCookie(REFRESH_COOKIE, REFRESH_COOKIE_PATH);
// Lax: the provider sends the browser back with a top-level GET from its own site, which a
// Strict cookie would not accompany.
const oauthFlowCookie = serviceCookie(OAUTH_FLOW_COOKIE, OAUTH_FLOW_COOKIE_PATH, 'lax');

/** Sets the refresh cookie: `Path=/auth/v0/refresh; HttpOnly; Secure; SameSite=Strict; Max-Age=<session remaining>`. */
export const setRefreshCookie = refreshCookie.set;
/** The clearing cookie: empty value, `Max-Age=0`, same path and attributes (docs/api.md#refresh-cookie). */
export const clearRefreshCookie = refreshCookie.clear;
/** Sets `oauth_flow=<value>; Path=/auth/v0/oauth; HttpOnly; Secure; SameSite=Lax; Max-Age=<seconds>`. */
export const setOAuthFlowCookie = oauthFlowCookie.set;
/** Clears the flow cookie: empty value, `Max-Age=0`, same path and attributes. */
export const clearOAuthFlowCookie = oauthFlowCookie.clear;
