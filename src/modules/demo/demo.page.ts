import { LATCHKEY_CLIENT_SCRIPT } from './latchkey-client.generated.js';

/**
 * The Latchkey demo page: one self-contained HTML document, inline CSS and script and no
 * external resource, that walks through the whole interface from a browser the way a real
 * single-page app would, on @latchkey/client (inlined from latchkey-client.generated.ts): the
 * access token in the client's memory only, the refresh token only in its HttpOnly cookie,
 * refreshes coordinated with the origin's other tabs. Every request the client makes is logged.
 *
 * What the page shows is what the API answered: every action reports success only for a 2xx
 * answer and otherwise shows the Error body's `message` and `code` (a failed logout leaves the
 * page signed in). The outcome appears next to the form or button that was used and is scrolled
 * into view, so it is seen on a narrow screen too; when that card has gone (the session ended),
 * under the state line at the top. The cards that need a session are hidden while signed out.
 * On load it restores the session through the refresh cookie, since the access token does not
 * survive a reload; a 401 there just means "signed out".
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
  /* In a card, right under the form or buttons that were used. */
  section .notice { margin: 0.6rem 0 0; }
  .button-row { display: flex; flex-wrap: wrap; gap: 0 0.4rem; }
  .state { background: #eef2f7; }
  .notice.ok { background: #e6f4ea; border: 1px solid #9fd0ad; }
  .notice.fail { background: #fbeae8; border: 1px solid #e3a39c; }
  .sessions-box { margin-top: 0.8rem; }
  table { width: 100%; table-layout: fixed; border-collapse: collapse; font-size: 0.8rem; }
  col.c-id { width: 13rem; } col.c-created { width: 10rem; } col.c-action { width: 5.5rem; } col.c-actions { width: 10rem; }
  th, td { text-align: left; padding: 0.3rem 0.4rem; border-bottom: 1px solid #e4e7eb; vertical-align: top; overflow-wrap: anywhere; }
  td.id { font-family: ui-monospace, monospace; font-size: 0.75rem; }
  td .current { display: block; margin-top: 0.15rem; font-family: system-ui, sans-serif; color: #17692f; }
  td button { margin: 0; padding: 0.1rem 0.5rem; justify-self: start; }
  td .actions { display: flex; flex-wrap: wrap; gap: 0.3rem; }
  td input { padding: 0.15rem 0.4rem; }
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
  .qr { width: 12rem; margin-top: 0.6rem; }
  .qr svg { display: block; width: 100%; height: auto; }
  .secret { font-family: ui-monospace, monospace; font-size: 0.8rem; overflow-wrap: anywhere; }
  .ok { color: #17692f; } .fail { color: #a3261c; } .info { color: #4a5562; }
</style>
</head>
<body>
<h1>Latchkey demo</h1>
<p class="lead">Every button calls the real API under <code>${apiPrefix}</code> through <code>@latchkey/client</code>. The access token
lives only in the client's memory (other tabs of this page get it from the tab that refreshed); the refresh token lives only in its <code>HttpOnly</code> cookie, which the browser sends to
<code>${apiPrefix}/refresh</code> and nowhere else (that is also how a reload gets the session back). This page is
served only when <code>DEMO_PAGE=true</code>. The cards that need a session appear once you are signed in.</p>
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
    <button id="signin-passkey" class="secondary" type="button">Sign in with a passkey</button>
    <div class="button-row" id="provider-buttons"></div>
    <form id="signin-mfa-form">
      <label for="signin-mfa-code">Code from the authenticator app, or a recovery code (when asked)</label><input id="signin-mfa-code" autocomplete="one-time-code" required>
      <button id="signin-mfa-submit" type="submit">Complete the sign-in</button>
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
  <section class="wide needs-session" id="session-card" hidden>
    <h2>4. Use the session</h2>
    <div class="button-row">
      <button id="me" type="button">GET /me</button>
      <button id="refresh" type="button">Refresh</button>
      <button id="sessions" type="button">List sessions</button>
      <button id="logout" class="secondary" type="button">Log out</button>
    </div>
    <div class="sessions-box" id="sessions-box">
      <table id="sessions-table" hidden>
        <colgroup><col class="c-id"><col class="c-created"><col class="c-agent"><col class="c-action"></colgroup>
        <thead><tr><th>session</th><th>created</th><th>user agent</th><th></th></tr></thead>
        <tbody id="sessions-list"></tbody>
      </table>
    </div>
  </section>
  <section class="needs-session" id="account-card" hidden>
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
  <section class="needs-session" id="delete-card" hidden>
    <h2>6. Delete the account</h2>
    <form id="delete-account-form">
      <label for="delete-password">Password</label><input id="delete-password" type="password" autocomplete="current-password" required>
      <button id="delete-account" type="submit">Delete my account</button>
    </form>
  </section>
  <section class="needs-session" id="mfa-card" hidden>
    <h2>7. Two-step sign-in (TOTP)</h2>
    <form id="totp-setup-form">
      <label for="totp-setup-password">Password</label><input id="totp-setup-password" type="password" autocomplete="current-password" required>
      <button id="totp-setup" type="submit">Set up an authenticator app</button>
    </form>
    <div id="totp-qr" class="qr" hidden></div>
    <p id="totp-secret" class="secret" hidden></p>
    <form id="totp-enable-form">
      <label for="totp-enable-code">Code from the app</label><input id="totp-enable-code" inputmode="numeric" pattern="[0-9]{6}" maxlength="6" autocomplete="one-time-code" required>
      <button id="totp-enable" type="submit">Turn on</button>
    </form>
    <ol id="recovery-codes" class="secret" hidden></ol>
    <form id="totp-disable-form">
      <label for="totp-disable-password">Password</label><input id="totp-disable-password" type="password" autocomplete="current-password" required>
      <label for="totp-disable-code">Code from the app, or a recovery code</label><input id="totp-disable-code" autocomplete="one-time-code" required>
      <button id="totp-disable" class="secondary" type="submit">Turn off</button>
    </form>
  </section>
  <section class="wide needs-session" id="passkeys-card" hidden>
    <h2>8. Passkeys</h2>
    <form id="passkey-add-form">
      <label for="passkey-name">Name of the new passkey (optional)</label><input id="passkey-name" maxlength="64" autocomplete="off">
      <button id="passkey-add" type="submit">Add a passkey</button>
      <button id="passkeys" class="secondary" type="button">List passkeys</button>
    </form>
    <div class="sessions-box">
      <table id="passkeys-table" hidden>
        <colgroup><col class="c-name"><col class="c-created"><col class="c-created"><col class="c-actions"></colgroup>
        <thead><tr><th>name</th><th>created</th><th>last used</th><th></th></tr></thead>
        <tbody id="passkeys-list"></tbody>
      </table>
      <p id="passkeys-empty" class="info" hidden>No passkey yet.</p>
    </div>
  </section>
  <section class="wide needs-session" id="identities-card" hidden>
    <h2>9. Sign-in providers</h2>
    <div class="button-row" id="provider-links">
      <button id="identities" class="secondary" type="button">List linked providers</button>
    </div>
    <div class="sessions-box">
      <table id="identities-table" hidden>
        <colgroup><col class="c-name"><col class="c-created"><col class="c-created"><col class="c-actions"></colgroup>
        <thead><tr><th>provider</th><th>linked</th><th>last sign-in</th><th></th></tr></thead>
        <tbody id="identities-list"></tbody>
      </table>
      <p id="identities-empty" class="info" hidden>No provider linked.</p>
    </div>
    <form id="set-password-form">
      <label for="set-password">First password (an account made by a provider has none)</label><input id="set-password" type="password" autocomplete="new-password" required>
      <button id="set-password-submit" type="submit">Set a password</button>
    </form>
  </section>
</div>
<h2>Requests</h2>
<ol id="log" reversed></ol>
<script nonce="${nonce}">
${LATCHKEY_CLIENT_SCRIPT}
(() => {
  'use strict';
  const API = ${JSON.stringify(apiPrefix)};
  const $ = (id) => document.getElementById(id);

  /** The signed-in user as the API last described it (sign-in, /me, confirm email change). */
  let user = null;
  /** Page actions in progress: their requests are logged when the action's outcome is shown. */
  let busy = 0;
  /** Requests answered but not logged yet, and the last answer to a refresh. */
  const pending = [];
  let lastRefresh = null;
  /** What the next refresh request is logged as: set by the action that makes it. */
  let refreshOp = 'restore session';
  /**
   * The form or button the user just used: set by the event listeners while their handler runs
   * up to its first await, which is where every handler calls act(); act() shows the outcome there.
   */
  let actionSource = null;

  /** Shows or hides the cards that need a session. */
  function showSessionCards(visible) {
    for (const card of document.querySelectorAll('section.needs-session')) card.hidden = !visible;
  }

  function renderState() {
    const state = $('state');
    if (!client.signedIn) return;
    state.dataset.signedIn = 'true';
    showSessionCards(true);
    const who = user === null ? 'Signed in' : 'Signed in as ' + user.username + (user.email ? ' (' + user.email + ')' : '');
    state.textContent = who + ': session ' + client.sessionId + ' (access token held in memory).';
  }

  function showSignedOut(text) {
    user = null;
    $('state').dataset.signedIn = 'false';
    $('state').textContent = text;
    showSessionCards(false);
    $('sessions-table').hidden = true;
    $('sessions-list').replaceChildren();
    $('passkeys-table').hidden = true;
    $('passkeys-empty').hidden = true;
    $('passkeys-list').replaceChildren();
    $('identities-table').hidden = true;
    $('identities-empty').hidden = true;
    $('identities-list').replaceChildren();
  }

  /**
   * The outcome of the last action: success only for a 2xx answer, otherwise what the API said.
   * Shown right after the form, button row or table of \`source\` (the element the user acted on)
   * while its card is shown, else under the state line; then scrolled into view.
   */
  function notify(kind, text, source = null) {
    const notice = $('notice');
    notice.className = 'notice ' + kind;
    notice.dataset.outcome = kind === 'ok' ? 'success' : 'error';
    notice.textContent = text;
    notice.hidden = false;
    const anchor = source === null ? null : (source.closest('form, .button-row, table') ?? source);
    const inCard = anchor !== null && anchor.isConnected && anchor.closest('[hidden]') === null;
    if (inCard) anchor.after(notice);
    else $('state').after(notice);
    // Scrolled at the next frame: after what the action's caller changes above it (the state
    // line). At the top, the state line comes into view with it: it says why the cards went.
    requestAnimationFrame(() => {
      if (!inCard) $('state').scrollIntoView({ block: 'nearest' });
      notice.scrollIntoView({ block: 'nearest' });
    });
  }

  /**
   * "message (code, HTTP status)" from a LatchkeyError, "message (code)" when the browser stopped
   * a passkey ceremony, or what can be said without an answer.
   */
  function describeFailure(err) {
    if (err.status === 0 && typeof err.code === 'string' && err.code.startsWith('client.passkey_')) return err.message + ' (' + err.code + ')';
    if (err.status === 0) return 'the request did not reach the server (network error)';
    if (typeof err.code === 'string') return err.message + ' (' + err.code + ', HTTP ' + err.status + ')';
    return String(err);
  }

  /**
   * Appends one request to the log: operation, status and the JSON answer (tokens shortened).
   * An expected failure (no session to restore on load) is logged in neutral colour.
   */
  function record({ op, status, body, expected }) {
    const li = document.createElement('li');
    li.dataset.op = op;
    li.dataset.status = String(status);
    li.className = status >= 200 && status < 300 ? 'ok' : expected ? 'info' : 'fail';
    const shown = body === undefined ? '' : '\\n' + JSON.stringify(body, (k, v) => (k === 'access_token' && typeof v === 'string' ? v.slice(0, 24) + '…' : v), 2);
    li.textContent = op + ' → ' + status + (expected && !(status >= 200 && status < 300) ? ' (' + expected + ')' : '') + shown;
    $('log').prepend(li);
  }
  function flush() {
    for (const entry of pending.splice(0)) record(entry);
  }

  /** The log's name for a request. */
  function opOf(method, path) {
    if (path === '/refresh') return refreshOp;
    if (path.startsWith('/sessions/')) return 'revoke session';
    if (path.startsWith('/passkeys/') && !path.startsWith('/passkeys/registration')) return method === 'DELETE' ? 'delete passkey' : 'rename passkey';
    if (path.startsWith('/identities/')) return 'unlink provider';
    if (path.startsWith('/oauth/') && path.endsWith('/link')) return 'link provider';
    if (path === '/oauth/providers') return 'providers';
    const names = { '/sign-in/mfa': 'sign-in mfa', '/verify-email/resend': 'resend', '/password-reset/confirm': 'password-reset confirm', '/change-email/confirm': 'change-email confirm', '/sessions': 'sessions' };
    return names[path] ?? path.slice(1);
  }

  /**
   * The fetch the client uses: the browser's own, each answer also kept for the log. The client
   * sends credentials: 'include', so the browser stores the refresh cookie and sends it where its
   * Path allows (the refresh endpoint only).
   */
  async function loggedFetch(input, init) {
    const request = new Request(input, init);
    const op = opOf(request.method, new URL(request.url).pathname.slice(API.length));
    let res;
    try {
      res = await fetch(request);
    } catch (err) {
      pending.push({ op, status: 0, body: { error: String(err) } });
      if (busy === 0) flush();
      throw err;
    }
    const text = await res.clone().text();
    let body;
    try { body = text === '' ? undefined : JSON.parse(text); } catch { body = text; }
    const entry = { op, status: res.status, body, expected: op === 'restore session' && res.status === 401 ? 'no session to restore' : undefined };
    if (op === refreshOp) lastRefresh = entry;
    pending.push(entry);
    if (busy === 0) flush();
    return res;
  }

  /**
   * The page's client: the access token in memory only, refreshes coordinated with other tabs of
   * this origin, and the session restored through the refresh cookie at once.
   */
  const client = LatchkeyClient.createClient({ baseUrl: API.replace(/\\/auth\\/v0$/, ''), fetch: loggedFetch });

  /** Why the session ended, as the page says it. */
  const SIGNED_OUT = {
    logout: 'Signed out.',
    account_deleted: 'Signed out: the account was deleted.',
    password_changed: 'Signed out: the password was changed.',
    sessions_revoked: 'Signed out: every session was revoked.',
    session_revoked: 'Signed out: this session was revoked.',
  };
  client.on('signedIn', renderState);
  client.on('tokenRefreshed', renderState);
  client.on('signedOut', ({ reason }) =>
    showSignedOut(SIGNED_OUT[reason] ?? (refreshOp === 'refresh' ? 'Signed out: the refresh token was refused.' : 'Signed out: the session has ended elsewhere (the refresh token was refused too).')),
  );

  /**
   * Runs one action: shows its outcome (success, or the Error body's message and code), then
   * logs its requests. Resolves to the action's result, or undefined when it failed.
   */
  async function act(action, run, success) {
    const source = actionSource;
    busy++;
    refreshOp = 'refresh (after 401)';
    try {
      const result = await run();
      notify('ok', typeof success === 'function' ? success(result) : success, source);
      return result ?? null;
    } catch (err) {
      notify('fail', action + ' failed: ' + describeFailure(err), source);
      return undefined;
    } finally {
      busy--;
      refreshOp = 'refresh (automatic)';
      flush();
    }
  }

  /** Runs a handler of a user's action on \`element\`, which act() then shows the outcome next to. */
  function fromUser(element, handler) {
    actionSource = element;
    try {
      return handler();
    } finally {
      actionSource = null;
    }
  }
  function onSubmit(formId, handler) {
    $(formId).addEventListener('submit', (event) => { event.preventDefault(); void fromUser(event.submitter ?? event.target, handler); });
  }
  function onClick(id, handler) { $(id).addEventListener('click', (event) => void fromUser(event.currentTarget, handler)); }

  onSubmit('signup-form', async () => {
    const email = $('signup-email').value;
    const body = await act('Sign-up', () => client.signUp({ username: $('signup-username').value, email, password: $('signup-password').value }),
      (r) => 'Signed up as ' + r.user.username + '. Enter the code sent to ' + email + '.');
    if (body !== undefined) {
      $('verify-email').value = email;
      $('signin-username').value = body.user.username;
    }
  });

  onSubmit('verify-form', () => act('Verification', () => client.verifyEmail({ email: $('verify-email').value, code: $('verify-code').value }), 'Email verified. Sign in.'));

  onClick('resend', () => act('Sending a new code', () => client.resendVerification({ email: $('verify-email').value }), 'If the address is waiting for verification, a new code is on its way.'));

  onSubmit('reset-request-form', () => {
    const email = $('reset-email').value;
    return act('Asking for a reset code', () => client.requestPasswordReset({ email }), 'If ' + email + ' has an account, a reset code is on its way.');
  });

  onSubmit('reset-confirm-form', async () => {
    const done = await act('Setting the new password', async () => {
      await client.confirmPasswordReset({ email: $('reset-email').value, code: $('reset-code').value, new_password: $('reset-password').value });
      // Every session of that account ended: if it was this one, the refresh cookie says so.
      if (client.signedIn) {
        refreshOp = 'refresh';
        if (!(await client.refresh())) showSignedOut('Signed out: the password was reset.');
      }
    }, 'Password replaced; every session of the account was signed out. Sign in with the new password.');
    if (done !== undefined) $('reset-password').value = '';
  });

  onSubmit('change-email-form', async () => {
    const newEmail = $('change-email-new').value;
    const done = await act('Changing the email address', () => client.changeEmail({ new_email: newEmail, password: $('change-email-password').value }),
      'A code was sent to ' + newEmail + '. Nothing changes until you confirm it.');
    if (done !== undefined) $('change-email-password').value = '';
  });

  onSubmit('change-email-confirm-form', async () => {
    const body = await act('Confirming the new address', () => client.confirmEmailChange({ code: $('change-email-code').value }), (r) => 'Your email address is now ' + r.user.email + '.');
    if (body !== undefined) {
      user = body.user;
      renderState();
    }
  });

  onSubmit('delete-account-form', async () => {
    const password = $('delete-password').value;
    $('delete-password').value = '';
    await act('Deleting the account', () => client.deleteAccount({ password }), 'Account deleted, with its sessions; the refresh cookie was cleared.');
  });

  /** A sign-in answer (either step) keeps the user and clears the secrets typed. */
  function signedInWith(body) {
    user = body.user;
    renderState();
    $('signin-password').value = '';
    $('signin-mfa-code').value = '';
  }

  onSubmit('signin-form', async () => {
    const body = await act('Sign-in', async () => {
      try {
        return await client.signIn({ username: $('signin-username').value, password: $('signin-password').value });
      } catch (err) {
        // The account has a second factor: the browser now holds the challenge cookie for the second step.
        if (err.code === 'auth.mfa_required') return null;
        throw err;
      }
    }, (r) => (r === null ? 'Password accepted; enter the code from the authenticator app to complete the sign-in.' : 'Signed in.'));
    if (body) signedInWith(body);
  });

  onClick('signin-passkey', async () => {
    const body = await act('Passkey sign-in', () => client.passkeys.signIn(), 'Signed in with a passkey.');
    if (body) signedInWith(body);
  });

  onSubmit('signin-mfa-form', async () => {
    const value = $('signin-mfa-code').value.trim();
    const body = await act('Second step', () => client.mfa.verify(/^[0-9]{6}$/.test(value) ? { code: value } : { recovery_code: value }), 'Signed in with the second factor.');
    if (body) signedInWith(body);
  });

  /**
   * Shows the QR code of an otpauth URI: the demo route renders it as SVG (with the qrcode
   * package), and the page inserts that SVG, so no script or image comes from elsewhere.
   */
  async function showQr(uri) {
    const res = await fetch(API + '/demo/totp-qr', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ otpauth_uri: uri }) });
    if (!res.ok) return;
    const svg = new DOMParser().parseFromString(await res.text(), 'image/svg+xml').documentElement;
    $('totp-qr').replaceChildren(document.importNode(svg, true));
    $('totp-qr').hidden = false;
  }

  onSubmit('totp-setup-form', async () => {
    const password = $('totp-setup-password').value;
    $('totp-setup-password').value = '';
    const body = await act('Setting up the authenticator app', () => client.mfa.setUp({ password }),
      'Scan the QR code with an authenticator app (or type the secret into it), then enter the code it shows to turn two-step sign-in on.');
    if (!body) return;
    $('totp-secret').textContent = 'Secret: ' + body.secret;
    $('totp-secret').dataset.secret = body.secret;
    $('totp-secret').hidden = false;
    await showQr(body.otpauth_uri);
  });

  onSubmit('totp-enable-form', async () => {
    const code = $('totp-enable-code').value.trim();
    $('totp-enable-code').value = '';
    const body = await act('Turning two-step sign-in on', () => client.mfa.enable({ code }),
      'Two-step sign-in is on. Keep the recovery codes below somewhere safe: each works once, and they are shown only now.');
    if (!body) return;
    $('recovery-codes').replaceChildren(...body.recovery_codes.map((c) => Object.assign(document.createElement('li'), { textContent: c })));
    $('recovery-codes').hidden = false;
    $('totp-qr').hidden = true;
    $('totp-secret').hidden = true;
  });

  onSubmit('totp-disable-form', async () => {
    const password = $('totp-disable-password').value;
    const code = $('totp-disable-code').value.trim();
    $('totp-disable-password').value = '';
    $('totp-disable-code').value = '';
    const done = await act('Turning two-step sign-in off', () => client.mfa.disable({ password, code }), 'Two-step sign-in is off: the password alone signs in.');
    if (done !== undefined) $('recovery-codes').hidden = true;
  });

  onClick('me', async () => {
    const body = await act('GET /me', () => client.me(), (r) => 'GET /me: you are ' + r.user.username + '.');
    if (body !== undefined && body.session_id === client.sessionId) {
      user = body.user;
      renderState();
    }
  });

  onClick('refresh', () =>
    act('Refresh', async () => {
      refreshOp = 'refresh';
      if (await client.refresh()) return;
      // The session is over (or there was none): the refresh answer says why.
      const body = lastRefresh === null ? {} : lastRefresh.body;
      throw { status: lastRefresh === null ? 0 : lastRefresh.status, code: body.code, message: body.message };
    }, 'New access token; the refresh cookie was rotated.'),
  );

  function cell(label, className) {
    const td = document.createElement('td');
    td.dataset.label = label;
    if (className) td.className = className;
    return td;
  }

  function showSessions(sessions) {
    const rows = $('sessions-list');
    rows.replaceChildren();
    for (const s of sessions) {
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
      button.addEventListener('click', () => void fromUser(button, () => revoke(s.id)));
      action.append(button);
      tr.append(id, created, agent, action);
      rows.append(tr);
    }
    $('sessions-table').hidden = false;
  }

  async function revoke(id) {
    const own = id === client.sessionId;
    const listed = await act('Revoking the session', async () => {
      await client.sessions.revoke(id);
      return own ? null : client.sessions.list();
    }, 'Session ' + id + ' revoked.');
    if (listed) showSessions(listed.sessions);
  }

  onClick('sessions', async () => {
    const body = await act('Listing the sessions', () => client.sessions.list(), (r) => r.sessions.length + ' active session' + (r.sessions.length === 1 ? '' : 's') + '.');
    if (body !== undefined) showSessions(body.sessions);
  });

  /**
   * The passkeys table: per passkey its name (editable in place, empty for none), when it was
   * created and last used, and its Rename and Delete buttons.
   */
  function showPasskeys(passkeys) {
    const rows = $('passkeys-list');
    rows.replaceChildren();
    for (const p of passkeys) {
      const tr = document.createElement('tr');
      tr.dataset.passkeyId = p.id;
      const name = cell('name');
      const input = document.createElement('input');
      input.className = 'passkey-name';
      input.maxLength = 64;
      input.value = p.name ?? '';
      input.placeholder = '(no name)';
      input.setAttribute('aria-label', 'Name of the passkey created ' + p.created_at.replace('T', ' '));
      name.append(input);
      const created = cell('created');
      created.textContent = p.created_at.replace('T', ' ');
      const used = cell('last used', 'last-used');
      used.textContent = p.last_used_at === null ? 'never' : p.last_used_at.replace('T', ' ');
      const action = cell('');
      const buttons = document.createElement('div');
      buttons.className = 'actions';
      for (const [label, className, run] of [['Rename', 'rename', () => renamePasskey(p.id, input.value.trim())], ['Delete', 'delete', () => deletePasskey(p.id)]]) {
        const button = document.createElement('button');
        button.type = 'button';
        button.className = 'secondary ' + className;
        button.dataset.passkeyId = p.id;
        button.textContent = label;
        button.setAttribute('aria-label', label + ' the passkey ' + (p.name === null ? 'created ' + p.created_at.replace('T', ' ') : p.name));
        button.addEventListener('click', () => void fromUser(button, run));
        buttons.append(button);
      }
      action.append(buttons);
      tr.append(name, created, used, action);
      rows.append(tr);
    }
    $('passkeys-table').hidden = passkeys.length === 0;
    $('passkeys-empty').hidden = passkeys.length !== 0;
  }

  const countOf = (r) => r.passkeys.length + ' passkey' + (r.passkeys.length === 1 ? '' : 's') + '.';

  onSubmit('passkey-add-form', async () => {
    const name = $('passkey-name').value.trim();
    const listed = await act('Adding a passkey', async () => {
      const { passkey } = await client.passkeys.register(name === '' ? {} : { name });
      return { passkey, list: await client.passkeys.list() };
    }, (r) => 'Passkey ' + (r.passkey.name === null ? '' : '"' + r.passkey.name + '" ') + 'added: it signs you in with no password.');
    if (listed === undefined) return;
    $('passkey-name').value = '';
    showPasskeys(listed.list.passkeys);
  });

  onClick('passkeys', async () => {
    const body = await act('Listing the passkeys', () => client.passkeys.list(), countOf);
    if (body !== undefined) showPasskeys(body.passkeys);
  });

  async function renamePasskey(id, name) {
    const listed = await act('Renaming the passkey', async () => {
      await client.passkeys.rename(id, name === '' ? null : name);
      return client.passkeys.list();
    }, name === '' ? 'Passkey name cleared.' : 'Passkey renamed to "' + name + '".');
    if (listed) showPasskeys(listed.passkeys);
  }

  async function deletePasskey(id) {
    const listed = await act('Deleting the passkey', async () => {
      await client.passkeys.delete(id);
      return client.passkeys.list();
    }, 'Passkey deleted: it no longer signs in (the authenticator may still offer it; remove it there too).');
    if (listed) showPasskeys(listed.passkeys);
  }

  onClick('logout', () => act('Log out', () => client.logout(), 'Logged out: the session was revoked and the refresh cookie cleared.'));

  /** This page: where a provider's flow returns (it must be under OAUTH_REDIRECT_URLS). */
  const DEMO_PAGE = location.origin + location.pathname;
  /** What the page says when a provider's flow came back with \`error\` (docs/errors.md lists every code). */
  const PROVIDER_ERRORS = {
    'auth.oauth.account_exists': 'An account with this email address exists: sign in with it, then link the provider under "Sign-in providers".',
    'auth.oauth.email_not_verified': 'The provider gave no verified email address.',
    'auth.oauth.identity_taken': 'This account at the provider is linked to another user.',
    'auth.oauth.provider_error': 'The provider refused (or the sign-in was cancelled there).',
  };

  /** A button per configured provider: sign in with it, and (signed in) link it. */
  async function showProviders() {
    let providers = [];
    try {
      providers = (await client.providers()).providers;
    } catch {
      return;
    }
    for (const p of providers) {
      const signIn = Object.assign(document.createElement('button'), { type: 'button', className: 'secondary provider-sign-in', textContent: 'Sign in with ' + p.name });
      signIn.dataset.provider = p.id;
      signIn.addEventListener('click', () => client.signInWithProvider(p.id, { redirectTo: DEMO_PAGE }));
      $('provider-buttons').append(signIn);
      const link = Object.assign(document.createElement('button'), { type: 'button', className: 'secondary provider-link', textContent: 'Link ' + p.name });
      link.dataset.provider = p.id;
      link.addEventListener('click', () => void fromUser(link, () => act('Linking ' + p.name, () => client.linkProvider(p.id, { redirectTo: DEMO_PAGE }), 'On the way to ' + p.name + '.')));
      $('provider-links').append(link);
    }
  }

  /** The linked providers table: per identity the provider and its email, when it was linked and last signed in, and Unlink. */
  function showIdentities(identities) {
    const rows = $('identities-list');
    rows.replaceChildren();
    for (const i of identities) {
      const tr = document.createElement('tr');
      tr.dataset.identityId = i.id;
      const name = cell('provider');
      name.textContent = i.provider + (i.email === null ? '' : ' (' + i.email + ')');
      const created = cell('linked');
      created.textContent = i.created_at.replace('T', ' ');
      const used = cell('last sign-in', 'last-used');
      used.textContent = i.last_sign_in_at === null ? 'never' : i.last_sign_in_at.replace('T', ' ');
      const action = cell('');
      const button = Object.assign(document.createElement('button'), { type: 'button', className: 'secondary unlink', textContent: 'Unlink' });
      button.dataset.identityId = i.id;
      button.setAttribute('aria-label', 'Unlink ' + i.provider);
      button.addEventListener('click', () => void fromUser(button, () => unlink(i.id)));
      action.append(button);
      tr.append(name, created, used, action);
      rows.append(tr);
    }
    $('identities-table').hidden = identities.length === 0;
    $('identities-empty').hidden = identities.length !== 0;
  }

  async function unlink(id) {
    const listed = await act('Unlinking the provider', async () => {
      await client.unlinkIdentity(id);
      return client.identities();
    }, 'Provider unlinked: it no longer signs in to this account.');
    if (listed) showIdentities(listed.identities);
  }

  onClick('identities', async () => {
    const body = await act('Listing the linked providers', () => client.identities(), (r) => r.identities.length + ' linked provider' + (r.identities.length === 1 ? '' : 's') + '.');
    if (body !== undefined) showIdentities(body.identities);
  });

  onSubmit('set-password-form', async () => {
    const password = $('set-password').value;
    $('set-password').value = '';
    await act('Setting a password', () => client.setPassword({ new_password: password }), 'Password set: it signs in too from now on.');
  });

  /** Back from a provider: the error its flow came back with, if any (removed from the address). */
  function showProviderReturn() {
    const error = client.readProviderError();
    if (error === null) return;
    if (error === 'auth.mfa_required') notify('ok', 'The provider signed you in; enter the code from the authenticator app to complete the sign-in.', $('signin-mfa-form'));
    else notify('fail', 'Sign-in with the provider failed: ' + (PROVIDER_ERRORS[error] ?? error) + ' (' + error + ')');
  }

  /**
   * On load the client restores the session through the refresh cookie (the access token did not
   * survive the reload). A 401 only means there is none: the page says "Signed out." and nothing more.
   */
  async function restore() {
    busy++;
    const restored = await client.ready;
    busy--;
    flush();
    refreshOp = 'refresh (automatic)';
    if (!restored) {
      if (client.signedIn) return; // signed in meanwhile
      if (lastRefresh !== null && lastRefresh.status === 401) showSignedOut('Signed out.');
      else {
        showSignedOut('Signed out (the session could not be checked).');
        notify('fail', 'Restoring the session failed: ' + describeFailure(lastRefresh === null ? { status: 0 } : { status: lastRefresh.status, code: lastRefresh.body && lastRefresh.body.code, message: lastRefresh.body && lastRefresh.body.message }));
      }
      return;
    }
    const body = await act('Restoring the session', () => client.me(), (r) => 'Session restored through the refresh cookie: you are ' + r.user.username + '.');
    if (body !== undefined && body.session_id === client.sessionId) {
      user = body.user;
      renderState();
    }
  }
  void restore();
  void showProviders();
  showProviderReturn();
})();
</script>
</body>
</html>
`;
}
