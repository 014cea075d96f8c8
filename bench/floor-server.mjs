// Floor references for the benchmark (bench/run.mjs): for each measured route, a bare
// implementation that does exactly the work a correct service cannot avoid, and nothing else.
// The service is compared with these in the same interleaved runs (docs/performance.md).
//
//   node bench/floor-server.mjs
//
// Serves the service's own paths, so the scenarios' request lists (bench/lib.mjs) work against
// it unchanged, on the service's database (DATABASE_URL, the same tables and rows), with the
// service's signing key (JWT_PRIVATE_KEY_FILE, RSA-2048), argon2id parameters, issuer,
// audience and lifetimes (read with the service's own loadConfig from the same environment):
//
//   GET  /auth/v0/me       me floor: one RS256 verification (node:crypto) of the Bearer token,
//                          then its session by primary key (not revoked, not expired, owned by
//                          `sub`) with its user; answers {user, session_id}.
//   POST /auth/v0/refresh  refresh floor: SHA-256 of the cookie, one autocommit statement that
//                          marks the presented token rotated (found by the row id the token
//                          starts with and its hash, guarded by "not yet rotated", its session
//                          unrevoked and unexpired) and inserts its successor, then one
//                          RS256 signature on libuv's thread pool; Set-Cookie and the JSON body.
//                          The signature needs the statement's answer (sub, sid and amr come
//                          from the session row; the token is opaque), so it follows it.
//   POST /auth/v0/sign-in  sign-in floor: one lookup by username, one argon2id verification,
//                          one statement inserting a session and its first refresh token with
//                          the RS256 signature computed meanwhile; Set-Cookie and the body.
//   POST /auth/v0/sign-up  sign-up floor: the password policy (the service's checkPassword),
//                          one argon2id hash, one INSERT of the user; 201 {user}.
//   GET  /auth/v0/oauth/:provider/authorize   identity-provider authorize floor: a random state,
//                          PKCE verifier (its S256 challenge) and flow-cookie secret, the
//                          SHA-256 of the state and of the secret, one INSERT of the flow row
//                          (oauth_flows, as the service stores it); 302 to the provider's
//                          authorization endpoint (OAUTH_<PROVIDER>_URL, the GitHub form) with
//                          the oauth_flow cookie.
//   GET  /admin/v0/users/:id   admin read floor: SHA-256 of the admin API key, then one
//                          statement that reads the key by primary key and the user by primary
//                          key with its AdminUser members; the hashes compared in constant time.
//   GET  /admin/v0/users?query=<prefix>&limit=N   admin search floor: the same key check, in
//                          one statement with the page: the users whose username or email
//                          starts with the prefix, newest first, under the prefix indexes.
//   GET  /healthz          readiness probe.
//
// argon2id runs at most argon2Concurrency() at a time, as in the service (one per core: more
// add no throughput and would queue the RS256 signatures behind them on libuv's pool). Logging
// off, like the other references. Listens on 127.0.0.1, port from PORT (0: any).
import { createHash, createPrivateKey, createPublicKey, randomBytes, randomUUID, sign as rsaSign, timingSafeEqual, verify as rsaVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hash, verify } from '@node-rs/argon2';
import Fastify from 'fastify';
import pg from 'pg';
import { loadConfig } from '../dist/src/config.js';
import { argon2Concurrency } from '../dist/src/crypto/password.js';
import { newRefreshToken, parseRefreshToken } from '../dist/src/crypto/refresh-token.js';
import { FLOW_TTL_SECONDS } from '../dist/src/modules/oauth/oauth.service.js';
import { checkPassword, SERVICE_NAME } from '../dist/src/modules/users/password-policy.js';

const config = loadConfig(process.env);
// Parsed once: a PEM passed to every sign() would be parsed again on each call.
const privateKey = createPrivateKey(readFileSync(process.env.JWT_PRIVATE_KEY_FILE, 'utf8'));
const publicKey = createPublicKey(privateKey);
const { issuer, audience, accessTokenTtlSeconds } = config.jwt;
/** argon2id type 2 (argon2id) with the service's cost parameters. */
const argon2Options = { algorithm: 2, memoryCost: config.argon2.memoryCost, timeCost: config.argon2.timeCost, parallelism: config.argon2.parallelism };
const encodedHeader = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'at+jwt', kid: 'floor' })).toString('base64url');
const REFRESH_COOKIE_ATTRIBUTES = 'Path=/auth/v0/refresh; HttpOnly; Secure; SameSite=Strict';
const MS_PER_SECOND = 1000;

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: config.databasePoolMax });
pool.on('error', () => {});
/** One named (prepared) statement, as the service runs them (src/db/pg.ts). */
const run = (name, text, values) => pool.query({ name: `floor_${name}`, text, values });

const sha256 = (text) => createHash('sha256').update(text, 'utf8').digest('base64url');

/** RS256 signature of an access token, on libuv's thread pool (node:crypto's callback form). */
function signAccessToken({ sub, sid, amr }) {
  const iat = Math.floor(Date.now() / MS_PER_SECOND);
  const payload = { sid, iss: issuer, aud: audience, sub, amr, iat, exp: iat + accessTokenTtlSeconds, jti: randomUUID() };
  const input = `${encodedHeader}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  return new Promise((resolve, reject) => {
    rsaSign('sha256', Buffer.from(input, 'ascii'), privateKey, (err, signature) => (err ? reject(err) : resolve(`${input}.${signature.toString('base64url')}`)));
  });
}

/** Runs at most `max` tasks at once; the others wait in call order. */
function limiter(max) {
  let running = 0;
  const waiting = [];
  return async (task) => {
    if (running < max) running++;
    else await new Promise((resolve) => waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next === undefined) running--;
      else next();
    }
  };
}
const argon2Slot = limiter(argon2Concurrency());

const USER_COLUMNS = 'u.id, u.username, u.email, u.phone, u.is_email_verified, u.is_phone_verified';
const wireUser = (u) => ({ id: u.id, username: u.username, email: u.email, phone: u.phone, is_email_verified: u.is_email_verified, is_phone_verified: u.is_phone_verified });
const unauthorized = (reply) => reply.code(401).send({ code: 'unauthorized' });
const refreshCookie = (token, maxAgeSeconds) => `refresh_token=${token}; Max-Age=${maxAgeSeconds}; ${REFRESH_COOKIE_ATTRIBUTES}`;

const app = Fastify({ logger: false });

app.get('/healthz', async () => ({ status: 'ok' }));

app.get('/auth/v0/me', async (request, reply) => {
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i.exec(request.headers.authorization ?? '');
  const parts = match?.[1].split('.');
  if (parts?.length !== 3) return unauthorized(reply);
  const header = JSON.parse(Buffer.from(parts[0], 'base64url').toString());
  if (header.alg !== 'RS256') return unauthorized(reply);
  if (!rsaVerify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii'), publicKey, Buffer.from(parts[2], 'base64url'))) return unauthorized(reply);
  const claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString());
  if (claims.iss !== issuer || claims.aud !== audience || !(claims.exp > Date.now() / MS_PER_SECOND)) return unauthorized(reply);
  const { rows } = await run(
    'me',
    `SELECT ${USER_COLUMNS} FROM sessions s JOIN users u ON u.id = s.user_id
      WHERE s.id = $1 AND s.user_id = $2 AND s.revoked_at IS NULL AND s.expires_at > now()`,
    [claims.sid, claims.sub],
  );
  if (rows.length !== 1) return unauthorized(reply);
  return { user: wireUser(rows[0]), session_id: claims.sid };
});

app.post('/auth/v0/refresh', async (request, reply) => {
  // A token of the current format (the service's own parser: 64 characters naming a row).
  const cookie = /(?:^|;\s*)refresh_token=([A-Za-z0-9_-]{64})(?:;|$)/.exec(request.headers.cookie ?? '')?.[1];
  const presented = cookie === undefined ? undefined : parseRefreshToken(cookie);
  if (presented?.id == null) return unauthorized(reply);
  const successor = newRefreshToken();
  const { rows } = await run(
    'refresh',
    `WITH rotated AS (
       UPDATE refresh_tokens rt SET rotated_at = now()
         FROM sessions s
        WHERE rt.id = $4 AND rt.token_hash = $1 AND rt.format = 2 AND rt.rotated_at IS NULL
          AND s.id = rt.session_id AND s.revoked_at IS NULL AND s.expires_at > now()
       RETURNING rt.id, rt.session_id, s.user_id, s.amr, s.expires_at
     ), successor AS (
       INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at, format)
       SELECT $2, session_id, $3, id, now(), 2 FROM rotated
     )
     SELECT session_id, user_id, amr, expires_at FROM rotated`,
    [presented.tokenHash, successor.id, successor.tokenHash, presented.id],
  );
  const family = rows[0];
  if (family === undefined) return unauthorized(reply);
  const accessToken = await signAccessToken({ sub: family.user_id, sid: family.session_id, amr: family.amr });
  const maxAge = Math.floor((family.expires_at.getTime() - Date.now()) / MS_PER_SECOND);
  reply.header('set-cookie', refreshCookie(successor.token, maxAge));
  return { tokens: { access_token: accessToken }, session_id: family.session_id };
});

app.post('/auth/v0/sign-in', async (request, reply) => {
  const { username, password } = request.body ?? {};
  if (typeof username !== 'string' || typeof password !== 'string') return unauthorized(reply);
  const { rows } = await run('sign_in_user', `SELECT ${USER_COLUMNS}, u.password_hash FROM users u WHERE u.username = $1`, [username]);
  const user = rows[0];
  if (user === undefined || !(await argon2Slot(() => verify(user.password_hash, password)))) return unauthorized(reply);
  const sessionId = randomUUID();
  const refreshToken = newRefreshToken();
  const signing = signAccessToken({ sub: user.id, sid: sessionId, amr: ['pwd'] });
  signing.catch(() => undefined);
  await run(
    'sign_in_session',
    `WITH s AS (
       INSERT INTO sessions (id, user_id, ip, user_agent, created_at, last_used_at, expires_at)
       VALUES ($1, $2, $3, $4, now(), now(), now() + make_interval(secs => $5)) RETURNING id
     )
     INSERT INTO refresh_tokens (id, session_id, token_hash, parent_id, created_at, format) SELECT $6, s.id, $7, NULL, now(), 2 FROM s`,
    [sessionId, user.id, request.ip, request.headers['user-agent'] ?? null, config.sessionTtlSeconds, refreshToken.id, refreshToken.tokenHash],
  );
  const accessToken = await signing;
  reply.header('set-cookie', refreshCookie(refreshToken.token, config.sessionTtlSeconds));
  return { user: wireUser(user), session_id: sessionId, tokens: { access_token: accessToken } };
});

app.post('/auth/v0/sign-up', async (request, reply) => {
  const { username, phone, password } = request.body ?? {};
  if (typeof username !== 'string' || typeof password !== 'string') return reply.code(400).send({ code: 'validation_failed' });
  const refused = await checkPassword(password, { username, email: null, serviceName: SERVICE_NAME });
  if (refused !== undefined) return reply.code(400).send({ code: 'validation_failed', message: refused.reason });
  const passwordHash = await argon2Slot(() => hash(password, argon2Options));
  try {
    const { rows } = await run(
      'sign_up',
      `INSERT INTO users AS u (id, username, email, phone, password_hash, created_at, updated_at)
       VALUES ($1, $2, NULL, $3, $4, now(), now()) RETURNING ${USER_COLUMNS}`,
      [randomUUID(), username, phone ?? null, passwordHash],
    );
    return reply.code(201).send({ user: wireUser(rows[0]) });
  } catch (err) {
    if (err.code === '23505') return reply.code(409).send({ code: 'taken' });
    throw err;
  }
});

/** Where the authorize floor stores that a flow returns: the first of OAUTH_REDIRECT_URLS, as the service's default. */
const FLOW_REDIRECT_TO = (process.env.OAUTH_REDIRECT_URLS ?? 'https://app.example/').split(',')[0].trim();
const FLOW_COOKIE_ATTRIBUTES = 'Path=/auth/v0/oauth; HttpOnly; Secure; SameSite=Lax';
/** Random bytes of the state, the PKCE verifier and the flow cookie's secret (RFC 7636 section 4.1: 32 octets for the verifier). */
const FLOW_RANDOM_BYTES = 32;

app.get('/auth/v0/oauth/:provider/authorize', async (request, reply) => {
  const provider = request.params.provider;
  const base = (process.env[`OAUTH_${provider.toUpperCase()}_URL`] ?? 'https://github.com').replace(/\/+$/, '');
  const state = randomBytes(FLOW_RANDOM_BYTES).toString('base64url');
  const codeVerifier = randomBytes(FLOW_RANDOM_BYTES).toString('base64url');
  const browserSecret = randomBytes(FLOW_RANDOM_BYTES).toString('base64url');
  const now = new Date();
  await run(
    'oauth_flow',
    `INSERT INTO oauth_flows (id, provider, state_hash, browser_hash, code_verifier, nonce, redirect_to, mode, user_id, session_id, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, NULL, $6, 'sign_in', NULL, NULL, $7, $8)`,
    [randomUUID(), provider, sha256(state), sha256(browserSecret), codeVerifier, FLOW_REDIRECT_TO, now, new Date(now.getTime() + FLOW_TTL_SECONDS * MS_PER_SECOND)],
  );
  const url = new URL(`${base}/login/oauth/authorize`);
  url.searchParams.set('client_id', process.env[`OAUTH_${provider.toUpperCase()}_CLIENT_ID`] ?? 'floor');
  url.searchParams.set('redirect_uri', `${config.publicUrl}/auth/v0/oauth/${provider}/callback`);
  url.searchParams.set('scope', 'read:user user:email');
  url.searchParams.set('state', state);
  url.searchParams.set('code_challenge', createHash('sha256').update(codeVerifier, 'ascii').digest('base64url'));
  url.searchParams.set('code_challenge_method', 'S256');
  reply.header('set-cookie', `oauth_flow=${browserSecret}; Max-Age=${FLOW_TTL_SECONDS}; ${FLOW_COOKIE_ATTRIBUTES}`);
  reply.header('cache-control', 'no-store');
  return reply.redirect(url.href, 302);
});

/** The admin API key of a request: its id (a UUID) and its text, or undefined. */
function adminKeyOf(authorization) {
  const m = /^Bearer +(lk_admin_([0-9a-f]{32})_[A-Za-z0-9_-]{43})$/.exec(authorization ?? '');
  if (m === null) return undefined;
  const hex = m[2];
  return { id: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`, text: m[1] };
}
const hashMatches = (text, stored) => stored != null && timingSafeEqual(Buffer.from(sha256(text)), Buffer.from(stored));
/** The key row of the admin floors: live keys only, with `users:read`. */
const ADMIN_KEY_SQL = `SELECT key_hash FROM admin_api_keys WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AND 'users:read' = ANY(scopes)`;
const ADMIN_USER_COLUMNS = `u.id, u.username, u.email, u.phone, u.is_email_verified, u.is_phone_verified, u.created_at, u.last_sign_in_at,
  u.password_hash IS NOT NULL AS has_password,
  EXISTS (SELECT 1 FROM mfa_totp m WHERE m.user_id = u.id AND m.enabled_at IS NOT NULL) AS mfa_enabled,
  (SELECT count(*) FROM passkeys p WHERE p.user_id = u.id)::int AS passkeys,
  (SELECT coalesce(json_agg(json_build_object('provider', i.provider, 'email', i.email) ORDER BY i.created_at), '[]'::json) FROM user_identities i WHERE i.user_id = u.id) AS identities,
  u.banned_at, u.banned_until, u.ban_reason`;
const adminUser = (u) => {
  const banned = u.banned_at !== null && (u.banned_until === null || u.banned_until > new Date());
  return {
    ...wireUser(u),
    created_at: u.created_at.toISOString(),
    last_sign_in_at: u.last_sign_in_at?.toISOString() ?? null,
    has_password: u.has_password,
    mfa_enabled: u.mfa_enabled,
    passkeys: u.passkeys,
    identities: u.identities,
    banned,
    banned_until: banned ? (u.banned_until?.toISOString() ?? null) : null,
    ban_reason: banned ? u.ban_reason : null,
  };
};

app.get('/admin/v0/users/:id', async (request, reply) => {
  const key = adminKeyOf(request.headers.authorization);
  if (key === undefined) return unauthorized(reply);
  const { rows } = await run(
    'admin_read',
    `WITH k AS (${ADMIN_KEY_SQL}) SELECT (SELECT key_hash FROM k) AS key_hash, ${ADMIN_USER_COLUMNS}
       FROM (SELECT 1) one LEFT JOIN users u ON u.id = $2`,
    [key.id, request.params.id],
  );
  const row = rows[0];
  if (!hashMatches(key.text, row?.key_hash)) return unauthorized(reply);
  if (row.id === null) return reply.code(404).send({ code: 'not_found' });
  return adminUser(row);
});

app.get('/admin/v0/users', async (request, reply) => {
  const key = adminKeyOf(request.headers.authorization);
  if (key === undefined) return unauthorized(reply);
  const limit = Number(request.query.limit ?? 50);
  const prefix = `${String(request.query.query ?? '').toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await run(
    'admin_search',
    `WITH k AS (${ADMIN_KEY_SQL}), page AS (
       SELECT id, created_at FROM (
         (SELECT id, created_at FROM users WHERE username LIKE $2 ORDER BY created_at DESC, id DESC LIMIT $3)
         UNION (SELECT id, created_at FROM users WHERE email LIKE $2 ORDER BY created_at DESC, id DESC LIMIT $3)
       ) m ORDER BY created_at DESC, id DESC LIMIT $3)
     SELECT (SELECT key_hash FROM k) AS key_hash, ${ADMIN_USER_COLUMNS}
       FROM (SELECT 1) one LEFT JOIN (page JOIN users u ON u.id = page.id) ON true
      ORDER BY u.created_at DESC, u.id DESC`,
    [key.id, prefix, limit + 1],
  );
  if (!hashMatches(key.text, rows[0]?.key_hash)) return unauthorized(reply);
  const users = rows.filter((r) => r.id !== null);
  return { users: users.slice(0, limit).map(adminUser), next_cursor: users.length > limit ? 'floor' : null };
});

app.addHook('onClose', async () => pool.end());
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    app.close().then(() => process.exit(0), () => process.exit(1));
  });
}
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`listening ${app.server.address().port}\n`);
