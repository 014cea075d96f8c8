// The browser side of the example: @latchkey/client keeps the session, in every tab of the
// origin, and calls the app's API with the access token. No bundler: the page loads this module
// as it is, and it imports the client's one-file build (dist/latchkey-client.min.js), which
// serve.mjs serves at /latchkey-client.min.js. With a bundler, import from '@latchkey/client'.
import { createClient } from '/latchkey-client.min.js';

// The service is routed under /auth/v0 of this origin (docs/integration.md), so baseUrl is ''.
const client = createClient({ baseUrl: '' });
const $ = (id) => document.getElementById(id);

function render() {
  $('state').textContent = client.signedIn ? `Signed in: session ${client.sessionId}.` : 'Signed out.';
  $('state').dataset.signedIn = String(client.signedIn);
}
function showError(err) {
  $('error').textContent = `${err.message} (${err.code ?? 'error'})`;
}

// Another tab signing in or out, a refresh answered 401, a logout: every tab follows.
client.on('signedIn', render);
client.on('signedOut', render);

$('sign-in').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('error').textContent = '';
  try {
    await client.signIn({ username: $('username').value, password: $('password').value });
    $('password').value = '';
  } catch (err) {
    showError(err); // 401 auth.invalid_credentials, 403 auth.email_not_verified, 429 with err.retryAfter
  }
});

$('call-api').addEventListener('click', async () => {
  try {
    // The access token is added, and refreshed once if the API answers 401 auth.invalid_access_token.
    const res = await client.fetch('/api/hello');
    $('api-result').textContent = `${res.status} ${await res.text()}`;
  } catch (err) {
    showError(err); // the auth service is unreachable and the token has expired
  }
});

$('logout').addEventListener('click', () => client.logout().catch(showError));

// A page load restores the session through the refresh cookie, if there is one.
await client.ready;
render();
