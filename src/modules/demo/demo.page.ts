/**
 * The Latchkey demo page: one self-contained HTML document, inline CSS and script and no
 * external resource, that walks through the whole interface from a browser the way a real
 * single-page app would: `fetch` with `credentials: 'include'`, the access token in a script
 * variable only, the refresh token only in its HttpOnly cookie.
 *
 * What the page shows is what the API answered: every action reports success only for a 2xx
 * answer and otherwise shows the Error body's `message` and `code` (a failed logout leaves the
 * page signed in). On load it restores the session through the refresh cookie, since the
 * access token does not survive a reload; a 401 there just means "signed out".
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
<title>Latchkey demo</title>
<style nonce="${nonce}">
  :root { font-family: system-ui, sans-serif; color: #1d232a; background: #f6f7f9; }
  [hidden] { display: none !important; }
  body { max-width: 60rem; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
  h1 { font-size: 1.4rem; margin-bottom: 0.2rem; }
  p.lead { margin-top: 0; color: #4a5562; }
  .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(17rem, 100%), 1fr)); gap: 1rem; }
  section { min-width: 0; background: #fff; border: 1px solid #d9dde3; border-radius: 8px; padding: 0.8rem 1rem 1rem; }
  section.wide { grid-column: 1 / -1; container-type: inline-size; }
  section h2 { font-size: 1rem; margin: 0 0 0.6rem; }
  label { display: block; font-size: 0.85rem; margin: 0.4rem 0 0.15rem; color: #4a5562; }
  input { width: 100%; box-sizing: border-box; padding: 0.35rem 0.5rem; border: 1px solid #b8c0ca; border-radius: 4px; font: inherit; }
  button { margin-top: 0.6rem; padding: 0.35rem 0.8rem; border: 1px solid #2c5d9e; border-radius: 4px; background: #2f6fbf; color: #fff; font: inherit; cursor: pointer; }
  button.secondary { background: #fff; color: #2c5d9e; }
  button:disabled { opacity: 0.5; cursor: default; }
  .state, .notice { font-size: 0.9rem; padding: 0.5rem 0.7rem; border-radius: 4px; margin: 0 0 1rem; overflow-wrap: anywhere; }
  .state { background: #eef2f7; }
  .notice.ok { background: #e6f4ea; border: 1px solid #9fd0ad; }
  .notice.fail { background: #fbeae8; border: 1px solid #e3a39c; }
  .sessions-box { margin-top: 0.8rem; }
  table { width: 100%; table-layout: fixed; border-collapse: collapse; font-size: 0.8rem; }
  col.c-id { width: 13rem; } col.c-created { width: 10rem; } col.c-action { width: 5.5rem; }
  th, td { text-align: left; padding: 0.3rem 0.4rem; border-bottom: 1px solid #e4e7eb; vertical-align: top; overflow-wrap: anywhere; }
  td.id { font-family: ui-monospace, monospace; font-size: 0.75rem; }
  td .current { display: block; margin-top: 0.15rem; font-family: system-ui, sans-serif; color: #17692f; }
  td button { margin: 0; padding: 0.1rem 0.5rem; justify-self: start; }
  /* A narrow card: one block per session, each value under its label, nothing wider than the card. */
  @container (max-width: 40rem) {
    table, tbody, tr, td { display: block; }
    colgroup, thead { display: none; }
    tr { padding: 0.4rem 0; border-bottom: 1px solid #e4e7eb; }
    td { display: grid; grid-template-columns: 5.5rem minmax(0, 1fr); gap: 0.5rem; padding: 0.15rem 0; border: 0; }
    td::before { content: attr(data-label); color: #4a5562; font-family: system-ui, sans-serif; }
  }
  ol#log { font-family: ui-monospace, monospace; font-size: 0.78rem; padding-left: 1.5rem; }
  ol#log li { margin-bottom: 0.5rem; white-space: pre-wrap; word-break: break-all; }
  .ok { color: #17692f; } .fail { color: #a3261c; } .info { color: #4a5562; }
</style>
</head>
<body>
<h1>Latchkey demo</h1>
<p class="lead">Every button calls the real API under <code>${apiPrefix}</code>. The access token lives only in a
script variable; the refresh token lives only in its <code>HttpOnly</code> cookie, which the browser sends to
<code>${apiPrefix}/refresh</code> and nowhere else (that is also how a reload gets the session back). This page is
served only when <code>DEMO_PAGE=true</code>.</p>
<p class="state" id="state" data-signed-in="unknown">Checking for a session…</p>
<p class="notice" id="notice" role="status" hidden></p>
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
    <h2>Forgot the password?</h2>
    <form id="reset-request-form">
      <label for="reset-email">Email</label><input id="reset-email" type="email" autocomplete="email" required>
      <button id="reset-request" type="submit">Send a reset code</button>
    </form>
    <form id="reset-confirm-form">
      <label for="reset-code">Code from the email</label><input id="reset-code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" required>
      <label for="reset-password">New password</label><input id="reset-password" type="password" autocomplete="new-password" required>
      <button id="reset-confirm" type="submit">Set the new password</button>
    </form>
  </section>
  <section class="wide" id="session-card">
    <h2>4. Use the session</h2>
    <button id="me" type="button">GET /me</button>
    <button id="refresh" type="button">Refresh</button>
    <button id="sessions" type="button">List sessions</button>
    <button id="logout" class="secondary" type="button">Log out</button>
    <div class="sessions-box" id="sessions-box">
      <table id="sessions-table" hidden>
        <colgroup><col class="c-id"><col class="c-created"><col class="c-agent"><col class="c-action"></colgroup>
        <thead><tr><th>session</th><th>created</th><th>user agent</th><th></th></tr></thead>
        <tbody id="sessions-list"></tbody>
      </table>
    </div>
  </section>
  <section id="account-card">
    <h2>5. Change the email address</h2>
    <form id="change-email-form">
      <label for="change-email-new">New email</label><input id="change-email-new" type="email" autocomplete="email" required>
      <label for="change-email-password">Password</label><input id="change-email-password" type="password" autocomplete="current-password" required>
      <button id="change-email-submit" type="submit">Send a code to the new address</button>
    </form>
    <form id="change-email-confirm-form">
      <label for="change-email-code">Code from the email to the new address</label><input id="change-email-code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" required>
      <button id="change-email-confirm" type="submit">Confirm the new address</button>
    </form>
  </section>
  <section id="delete-card">
    <h2>6. Delete the account</h2>
    <form id="delete-account-form">
      <label for="delete-password">Password</label><input id="delete-password" type="password" autocomplete="current-password" required>
      <button id="delete-account" type="submit">Delete my account</button>
    </form>
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
  /** The signed-in user as the API last described it (sign-in or /me). */
  let user = null;
  /** Bumped on every sign-in and sign-out, so a slower answer cannot overwrite a newer state. */
  let epoch = 0;
  const $ = (id) => document.getElementById(id);

  const ok = (res) => res.status >= 200 && res.status < 300;

  function renderState() {
    const state = $('state');
    if (accessToken === null) return;
    state.dataset.signedIn = 'true';
    const who = user === null ? 'Signed in' : 'Signed in as ' + user.username + (user.email ? ' (' + user.email + ')' : '');
    state.textContent = who + ': session ' + sessionId + ' (access token held in memory).';
  }

  function showSignedOut(text) {
    $('state').dataset.signedIn = 'false';
    $('state').textContent = text;
  }

  /** The outcome of the last action: success only for a 2xx answer, otherwise what the API said. */
  function notify(kind, text) {
    const notice = $('notice');
    notice.className = 'notice ' + kind;
    notice.dataset.outcome = kind === 'ok' ? 'success' : 'error';
    notice.textContent = text;
    notice.hidden = false;
  }

  /** "message (code, HTTP status)" from an Error body, or the best that can be said without one. */
  function describeFailure(res) {
    if (res.status === 0) return 'the request did not reach the server (' + (res.body && res.body.error ? res.body.error : 'network error') + ')';
    const body = res.body;
    if (body !== null && typeof body === 'object' && typeof body.message === 'string') {
      return body.message + ' (' + (typeof body.code === 'string' ? body.code + ', ' : '') + 'HTTP ' + res.status + ')';
    }
    return 'HTTP ' + res.status + (typeof body === 'string' && body !== '' ? ': ' + body.slice(0, 200) : '');
  }

  /** Shows the outcome of one action; returns whether it succeeded. */
  function report(action, res, success) {
    if (ok(res)) notify('ok', typeof success === 'function' ? success(res) : success);
    else notify('fail', action + ' failed: ' + describeFailure(res));
    return ok(res);
  }

  /**
   * Appends one request to the log: operation, status and the JSON answer (tokens shortened).
   * An expected failure (no session to restore on load) is logged in neutral colour.
   */
  function record(op, status, body, expected) {
    const li = document.createElement('li');
    li.dataset.op = op;
    li.dataset.status = String(status);
    li.className = status >= 200 && status < 300 ? 'ok' : expected ? 'info' : 'fail';
    const shown = body === undefined ? '' : '\\n' + JSON.stringify(body, (k, v) => (k === 'access_token' && typeof v === 'string' ? v.slice(0, 24) + '…' : v), 2);
    li.textContent = op + ' → ' + status + (expected && !(status >= 200 && status < 300) ? ' (' + expected + ')' : '') + shown;
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
      return { status: 0, body: { error: String(err) } };
    }
    const text = await res.text();
    let body;
    try { body = text === '' ? undefined : JSON.parse(text); } catch { body = text; }
    record(op, res.status, body, res.status === 401 ? options.expected401 : undefined);
    return { status: res.status, body };
  }

  /** Keeps the access token of a sign-in or refresh answer (and the user, which only sign-in returns). */
  function keepTokens(body) {
    epoch++;
    accessToken = body.tokens.access_token;
    if (body.session_id !== sessionId) user = null;
    sessionId = body.session_id;
    if (body.user) user = body.user;
    renderState();
  }

  function signedOut(why) {
    epoch++;
    accessToken = null;
    sessionId = null;
    user = null;
    $('sessions-table').hidden = true;
    $('sessions-list').replaceChildren();
    showSignedOut(why);
  }

  /**
   * A call with the access token. On a 401 while signed in, refresh once (the cookie does it) and
   * retry; if the refresh token is refused too, the session has ended and the page says so. Any
   * other failure (a 503, a network error) changes nothing: the session may well be alive.
   */
  async function withBearer(op, method, path, json) {
    let result = await call(op, method, path, { bearer: true, json });
    if (result.status === 401 && accessToken !== null && !(result.body && result.body.code === 'auth.invalid_current_password')) {
      const refreshed = await call('refresh (after 401)', 'POST', '/refresh');
      if (refreshed.status === 200) {
        keepTokens(refreshed.body);
        result = await call(op, method, path, { bearer: true, json });
      } else if (refreshed.status === 401) {
        signedOut('Signed out: the session has ended elsewhere (the refresh token was refused too).');
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
    if (report('Sign-up', res, 'Signed up as ' + (res.body && res.body.user ? res.body.user.username : '') + '. Enter the code sent to ' + email + '.')) {
      $('verify-email').value = email;
      $('signin-username').value = res.body.user.username;
    }
  });

  onSubmit('verify-form', async () => {
    const res = await call('verify-email', 'POST', '/verify-email', { json: { email: $('verify-email').value, code: $('verify-code').value } });
    report('Verification', res, 'Email verified. Sign in.');
  });

  onClick('resend', async () => {
    const res = await call('resend', 'POST', '/verify-email/resend', { json: { email: $('verify-email').value } });
    report('Sending a new code', res, 'If the address is waiting for verification, a new code is on its way.');
  });

  onSubmit('reset-request-form', async () => {
    const email = $('reset-email').value;
    const res = await call('password-reset', 'POST', '/password-reset', { json: { email } });
    report('Asking for a reset code', res, 'If ' + email + ' has an account, a reset code is on its way.');
  });

  onSubmit('reset-confirm-form', async () => {
    const res = await call('password-reset confirm', 'POST', '/password-reset/confirm', {
      json: { email: $('reset-email').value, code: $('reset-code').value, new_password: $('reset-password').value },
    });
    if (report('Setting the new password', res, 'Password replaced; every session of the account was signed out. Sign in with the new password.')) {
      $('reset-password').value = '';
      if (accessToken !== null) signedOut('Signed out: the password was reset.');
    }
  });

  onSubmit('change-email-form', async () => {
    const newEmail = $('change-email-new').value;
    const res = await withBearer('change-email', 'POST', '/change-email', { new_email: newEmail, password: $('change-email-password').value });
    if (report('Changing the email address', res, 'A code was sent to ' + newEmail + '. Nothing changes until you confirm it.')) $('change-email-password').value = '';
  });

  onSubmit('change-email-confirm-form', async () => {
    const res = await withBearer('change-email confirm', 'POST', '/change-email/confirm', { code: $('change-email-code').value });
    if (report('Confirming the new address', res, (r) => 'Your email address is now ' + r.body.user.email + '.')) {
      user = res.body.user;
      renderState();
    }
  });

  onSubmit('delete-account-form', async () => {
    const res = await withBearer('delete-account', 'POST', '/delete-account', { password: $('delete-password').value });
    $('delete-password').value = '';
    if (report('Deleting the account', res, 'Account deleted, with its sessions; the refresh cookie was cleared.')) signedOut('Signed out: the account was deleted.');
  });

  onSubmit('signin-form', async () => {
    const res = await call('sign-in', 'POST', '/sign-in', { json: { username: $('signin-username').value, password: $('signin-password').value } });
    if (report('Sign-in', res, 'Signed in.')) {
      keepTokens(res.body);
      $('signin-password').value = '';
    }
  });

  onClick('me', async () => {
    const res = await withBearer('me', 'GET', '/me');
    if (report('GET /me', res, (r) => 'GET /me: you are ' + r.body.user.username + '.') && res.body.session_id === sessionId) {
      user = res.body.user;
      renderState();
    }
  });

  onClick('refresh', async () => {
    const res = await call('refresh', 'POST', '/refresh');
    if (report('Refresh', res, 'New access token; the refresh cookie was rotated.')) keepTokens(res.body);
    else if (res.status === 401 && accessToken !== null) signedOut('Signed out: the refresh token was refused.');
  });

  function cell(label, className) {
    const td = document.createElement('td');
    td.dataset.label = label;
    if (className) td.className = className;
    return td;
  }

  /** Lists the sessions; returns the answer (the caller reports it). */
  async function listSessions() {
    const res = await withBearer('sessions', 'GET', '/sessions');
    if (!ok(res)) return res;
    const rows = $('sessions-list');
    rows.replaceChildren();
    for (const s of res.body.sessions) {
      const tr = document.createElement('tr');
      tr.dataset.sessionId = s.id;
      const id = cell('session', 'id');
      const value = document.createElement('div');
      value.textContent = s.id;
      if (s.current) {
        const mark = document.createElement('span');
        mark.className = 'current';
        mark.textContent = '(this one)';
        value.append(mark);
      }
      id.append(value);
      const created = cell('created');
      created.textContent = s.created_at.replace('T', ' ');
      const agent = cell('user agent', 'agent');
      agent.textContent = s.user_agent ?? '';
      const action = cell('');
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'secondary revoke';
      button.dataset.sessionId = s.id;
      button.textContent = 'Revoke';
      button.addEventListener('click', () => void revoke(s.id));
      action.append(button);
      tr.append(id, created, agent, action);
      rows.append(tr);
    }
    $('sessions-table').hidden = false;
    return res;
  }

  async function revoke(id) {
    const res = await withBearer('revoke session', 'DELETE', '/sessions/' + encodeURIComponent(id));
    if (!report('Revoking the session', res, 'Session ' + id + ' revoked.')) return;
    if (id === sessionId) {
      signedOut('Signed out: this session was revoked.');
      return;
    }
    const listed = await listSessions();
    if (!ok(listed)) report('Listing the sessions', listed, '');
  }

  onClick('sessions', async () => {
    const res = await listSessions();
    report('Listing the sessions', res, (r) => r.body.sessions.length + ' active session' + (r.body.sessions.length === 1 ? '' : 's') + '.');
  });

  onClick('logout', async () => {
    const res = await withBearer('logout', 'POST', '/logout');
    if (report('Log out', res, 'Logged out: the session was revoked and the refresh cookie cleared.')) signedOut('Signed out.');
  });

  /**
   * On load: the access token did not survive the reload, but the refresh cookie did (if there
   * is a session). A 401 only means there is none: the page says "Signed out." and nothing more.
   */
  async function restore() {
    const started = epoch;
    const res = await call('restore session', 'POST', '/refresh', { expected401: 'no session to restore' });
    if (epoch !== started) return;
    if (res.status === 401) { showSignedOut('Signed out.'); return; }
    if (!ok(res)) {
      showSignedOut('Signed out (the session could not be checked).');
      report('Restoring the session', res, '');
      return;
    }
    keepTokens(res.body);
    const restored = epoch;
    const me = await call('me', 'GET', '/me', { bearer: true });
    if (epoch !== restored) return;
    if (report('Restoring the session', me, (r) => 'Session restored through the refresh cookie: you are ' + r.body.user.username + '.') && me.body.session_id === sessionId) {
      user = me.body.user;
      renderState();
    }
  }
  void restore();
})();
</script>
</body>
</html>
`;
}
