/**
 * The demo page (issue 5 point 6): one self-contained HTML document, inline CSS and script and
 * no external resource, that walks through the whole interface from a browser the way a real
 * single-page app would: `fetch` with `credentials: 'include'`, the access token in a script
 * variable only, the refresh token only in its HttpOnly cookie.
 *
 * The inline `<style>` and `<script>` carry the per-response CSP nonce; the page uses no inline
 * event handler or `style` attribute, which that policy would block.
 *
 * @param options.nonce the CSP nonce of this response (base64, from a CSPRNG).
 * @param options.apiPrefix where the API lives, `/auth/v0`.
 */
export function demoPageHtml(options: { nonce: string; apiPrefix: string }): string {
  const { nonce, apiPrefix } = options;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>auth-service demo</title>
<style nonce="${nonce}">
  :root { font-family: system-ui, sans-serif; color: #1d232a; background: #f6f7f9; }
  body { max-width: 60rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
  h1 { font-size: 1.4rem; margin-bottom: 0.2rem; }
  p.lead { margin-top: 0; color: #4a5562; }
  .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(17rem, 1fr)); gap: 1rem; }
  section { background: #fff; border: 1px solid #d9dde3; border-radius: 8px; padding: 0.8rem 1rem 1rem; }
  section h2 { font-size: 1rem; margin: 0 0 0.6rem; }
  label { display: block; font-size: 0.85rem; margin: 0.4rem 0 0.15rem; color: #4a5562; }
  input { width: 100%; box-sizing: border-box; padding: 0.35rem 0.5rem; border: 1px solid #b8c0ca; border-radius: 4px; font: inherit; }
  button { margin-top: 0.6rem; padding: 0.35rem 0.8rem; border: 1px solid #2c5d9e; border-radius: 4px; background: #2f6fbf; color: #fff; font: inherit; cursor: pointer; }
  button.secondary { background: #fff; color: #2c5d9e; }
  button:disabled { opacity: 0.5; cursor: default; }
  .state { font-size: 0.9rem; padding: 0.5rem 0.7rem; border-radius: 4px; background: #eef2f7; margin: 0 0 1rem; }
  table { width: 100%; border-collapse: collapse; font-size: 0.8rem; }
  th, td { text-align: left; padding: 0.25rem 0.3rem; border-bottom: 1px solid #e4e7eb; vertical-align: top; }
  td button { margin: 0; padding: 0.1rem 0.5rem; }
  ol#log { font-family: ui-monospace, monospace; font-size: 0.78rem; padding-left: 1.5rem; }
  ol#log li { margin-bottom: 0.5rem; white-space: pre-wrap; word-break: break-all; }
  .ok { color: #17692f; } .fail { color: #a3261c; }
</style>
</head>
<body>
<h1>auth-service demo</h1>
<p class="lead">Every button calls the real API under <code>${apiPrefix}</code>. The access token lives only in a
script variable; the refresh token lives only in its <code>HttpOnly</code> cookie, which the browser sends to
<code>${apiPrefix}/refresh</code> and nowhere else. This page is served only when <code>DEMO_PAGE=true</code>.</p>
<p class="state" id="state">Signed out.</p>
<div class="grid">
  <section>
    <h2>1. Sign up</h2>
    <form id="signup-form">
      <label for="signup-username">Username</label><input id="signup-username" autocomplete="username" required>
      <label for="signup-email">Email</label><input id="signup-email" type="email" autocomplete="email" required>
      <label for="signup-password">Password</label><input id="signup-password" type="password" autocomplete="new-password" required>
      <button id="signup-submit" type="submit">Sign up</button>
    </form>
  </section>
  <section>
    <h2>2. Verify the email</h2>
    <form id="verify-form">
      <label for="verify-email">Email</label><input id="verify-email" type="email" required>
      <label for="verify-code">Code from the email</label><input id="verify-code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" required>
      <button id="verify-submit" type="submit">Verify</button>
      <button id="resend" class="secondary" type="button">Send a new code</button>
    </form>
  </section>
  <section>
    <h2>3. Sign in</h2>
    <form id="signin-form">
      <label for="signin-username">Username</label><input id="signin-username" autocomplete="username" required>
      <label for="signin-password">Password</label><input id="signin-password" type="password" autocomplete="current-password" required>
      <button id="signin-submit" type="submit">Sign in</button>
    </form>
  </section>
  <section>
    <h2>4. Use the session</h2>
    <button id="me" type="button">GET /me</button>
    <button id="refresh" type="button">Refresh</button>
    <button id="sessions" type="button">List sessions</button>
    <button id="logout" class="secondary" type="button">Log out</button>
    <table id="sessions-table" hidden>
      <thead><tr><th>session</th><th>created</th><th>user agent</th><th></th></tr></thead>
      <tbody id="sessions-list"></tbody>
    </table>
  </section>
</div>
<h2>Requests</h2>
<ol id="log" reversed></ol>
<script nonce="${nonce}">
(() => {
  'use strict';
  const API = ${JSON.stringify(apiPrefix)};
  /** The access token: in memory only, never in storage (a script variable dies with the page). */
  let accessToken = null;
  let sessionId = null;
  const $ = (id) => document.getElementById(id);

  function showState(text) { $('state').textContent = text; }

  /** Appends one request to the log: operation, status and the JSON answer (tokens shortened). */
  function record(op, status, body) {
    const li = document.createElement('li');
    li.dataset.op = op;
    li.dataset.status = String(status);
    li.className = status >= 200 && status < 300 ? 'ok' : 'fail';
    const shown = body === undefined ? '' : '\\n' + JSON.stringify(body, (k, v) => (k === 'access_token' && typeof v === 'string' ? v.slice(0, 24) + '…' : v), 2);
    li.textContent = op + ' → ' + status + shown;
    $('log').prepend(li);
  }

  /**
   * Calls the API. credentials: 'include' makes the browser send and store cookies: the
   * refresh cookie goes only where its Path allows (the refresh endpoint).
   */
  async function call(op, method, path, options = {}) {
    const headers = {};
    if (options.json !== undefined) headers['content-type'] = 'application/json';
    if (options.bearer && accessToken !== null) headers.authorization = 'Bearer ' + accessToken;
    let res;
    try {
      res = await fetch(API + path, {
        method,
        headers,
        credentials: 'include',
        body: options.json === undefined ? undefined : JSON.stringify(options.json),
      });
    } catch (err) {
      record(op, 0, { error: String(err) });
      return { status: 0, body: undefined };
    }
    const text = await res.text();
    let body;
    try { body = text === '' ? undefined : JSON.parse(text); } catch { body = text; }
    record(op, res.status, body);
    return { status: res.status, body };
  }

  /** Keeps the access token of a sign-in or refresh answer. */
  function keepTokens(body) {
    accessToken = body.tokens.access_token;
    sessionId = body.session_id;
    showState('Signed in: session ' + sessionId + ' (access token held in memory).');
  }

  function signedOut(why) {
    accessToken = null;
    sessionId = null;
    $('sessions-table').hidden = true;
    $('sessions-list').replaceChildren();
    showState(why);
  }

  /** A 401 with a stale access token: refresh once (the cookie does it), then retry. */
  async function withBearer(op, method, path) {
    let result = await call(op, method, path, { bearer: true });
    if (result.status === 401 && accessToken !== null) {
      const refreshed = await call('refresh (after 401)', 'POST', '/refresh');
      if (refreshed.status === 200) {
        keepTokens(refreshed.body);
        result = await call(op, method, path, { bearer: true });
      } else {
        signedOut('Signed out: the session ended.');
      }
    }
    return result;
  }

  function onSubmit(formId, handler) {
    $(formId).addEventListener('submit', (event) => { event.preventDefault(); void handler(); });
  }
  function onClick(id, handler) { $(id).addEventListener('click', () => void handler()); }

  onSubmit('signup-form', async () => {
    const email = $('signup-email').value;
    const res = await call('sign-up', 'POST', '/sign-up', { json: { username: $('signup-username').value, email, password: $('signup-password').value } });
    if (res.status === 201) {
      $('verify-email').value = email;
      $('signin-username').value = res.body.user.username;
      showState('Signed up. Enter the code sent to ' + email + '.');
    }
  });

  onSubmit('verify-form', async () => {
    const res = await call('verify-email', 'POST', '/verify-email', { json: { email: $('verify-email').value, code: $('verify-code').value } });
    if (res.status === 204) showState('Email verified. Sign in.');
  });

  onClick('resend', () => call('resend', 'POST', '/verify-email/resend', { json: { email: $('verify-email').value } }));

  onSubmit('signin-form', async () => {
    const res = await call('sign-in', 'POST', '/sign-in', { json: { username: $('signin-username').value, password: $('signin-password').value } });
    if (res.status === 200) keepTokens(res.body);
  });

  onClick('me', () => withBearer('me', 'GET', '/me'));

  onClick('refresh', async () => {
    const res = await call('refresh', 'POST', '/refresh');
    if (res.status === 200) keepTokens(res.body);
    else if (accessToken !== null) signedOut('Signed out: the refresh token was refused.');
  });

  async function listSessions() {
    const res = await withBearer('sessions', 'GET', '/sessions');
    const rows = $('sessions-list');
    rows.replaceChildren();
    if (res.status !== 200) { $('sessions-table').hidden = true; return; }
    for (const s of res.body.sessions) {
      const tr = document.createElement('tr');
      for (const text of [s.id.slice(0, 8) + (s.current ? ' (this one)' : ''), s.created_at, s.user_agent ?? '']) {
        const td = document.createElement('td');
        td.textContent = text;
        tr.append(td);
      }
      const td = document.createElement('td');
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'secondary revoke';
      button.dataset.sessionId = s.id;
      button.textContent = 'Revoke';
      button.addEventListener('click', async () => {
        const r = await withBearer('revoke session', 'DELETE', '/sessions/' + encodeURIComponent(s.id));
        if (r.status === 204 && s.id === sessionId) signedOut('Signed out: this session was revoked.');
        else await listSessions();
      });
      td.append(button);
      tr.append(td);
      rows.append(tr);
    }
    $('sessions-table').hidden = false;
  }
  onClick('sessions', listSessions);

  onClick('logout', async () => {
    const res = await withBearer('logout', 'POST', '/logout');
    if (res.status === 204 || res.status === 401) signedOut('Signed out (the refresh cookie was cleared).');
  });
})();
</script>
</body>
</html>
`;
}
