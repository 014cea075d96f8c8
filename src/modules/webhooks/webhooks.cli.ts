import {
  auditLogger,
  EXIT_ERROR,
  EXIT_OK,
  formatTable,
  parseCommandArgs,
  runWithUsage,
  UsageError,
  wantsHelp,
  withCommandDatabase,
  type DatabaseCommandIo,
} from '../../cli-support.js';
import type { Config } from '../../config.js';
import type { Db } from '../../db/db.js';
import type { Clock } from '../../clock.js';
import { CLI_ACTOR, auditedAs } from '../admin/operator-actions.js';
import { loadWebhookSecretKey } from '../keys/keys.service.js';
import type { Delivery, Endpoint } from './webhooks.schemas.js';
import { createWebhooksService, WebhookRequestError, type ChangeOptions, type WebhookChange, type WebhooksService } from './webhooks.service.js';

/** `last_error` is cut to this many characters in the deliveries table. */
const LAST_ERROR_COLUMN_WIDTH = 60;

const FOOTER = `
The database is the service's (DATABASE_URL, or the embedded one in DATA_DIR: stop the service
first, the embedded database admits one process at a time). Secrets are encrypted with the key
of WEBHOOK_KEY_FILE (else the one generated into DATA_DIR): the service must read the same one.
`;

/** `latchkey webhooks --help`. */
export const WEBHOOKS_USAGE = `Usage: latchkey webhooks <command> [options]

Webhook endpoints: where the service delivers its events (docs/api.md#events-and-webhooks).

Commands:
  add --url URL --events TYPES          add an endpoint; prints its secret once
  list                                  show every endpoint
  update ID [--url URL] [--events TYPES] [--enable | --disable]
  remove ID                             remove an endpoint and every delivery to it
  rotate-secret ID                      give an endpoint a new secret; prints it once
  deliveries ID [--status S] [--limit N] [--cursor C]
                                        show an endpoint's deliveries, newest first
  retry ID DELIVERY_ID                  make a new attempt of a delivery due now

TYPES is * (every event type) or a comma-separated list of event types, such as
user.created,user.deleted. See "latchkey webhooks <command> --help".
${FOOTER}`;

const USAGES: Record<string, string> = {
  add: `Usage: latchkey webhooks add --url URL --events TYPES

Adds an endpoint, enabled. URL is https://, or http:// for localhost, 127.0.0.0/8 or [::1] only.
TYPES is * or a comma-separated list of event types. Prints the endpoint, then its secret
(whsec_...) alone on the last line: it is shown only now. Receivers verify each request with it.
${FOOTER}`,
  list: `Usage: latchkey webhooks list

Shows every endpoint: id, url, event_types, enabled, created_at (UTC). Never a secret.
${FOOTER}`,
  update: `Usage: latchkey webhooks update ID [--url URL] [--events TYPES] [--enable | --disable]

Changes an endpoint. Disabled, its pending deliveries wait and no delivery is created for the
events recorded meanwhile; enabled again, the waiting deliveries go out (the missed events do not).
${FOOTER}`,
  remove: `Usage: latchkey webhooks remove ID

Removes an endpoint; its pending deliveries are dropped, never attempted again.
${FOOTER}`,
  'rotate-secret': `Usage: latchkey webhooks rotate-secret ID

Gives an endpoint a new secret, printed alone on the last line (shown only now). For 24 hours
every request carries two signatures, the new secret's first, so receivers can switch at any
moment; a second rotation within 24 hours drops the oldest secret.
${FOOTER}`,
  deliveries: `Usage: latchkey webhooks deliveries ID [--status pending|delivered|dead] [--limit N] [--cursor C]

Shows an endpoint's deliveries, newest first: id, event_type, status, attempts, last_attempt_at,
last_status, last_error, next_attempt_at. --limit is 1 to 200 (default 50); when more follow,
the last line gives the --cursor of the next page.
${FOOTER}`,
  retry: `Usage: latchkey webhooks retry ID DELIVERY_ID

Makes a new attempt of a delivery due now, whatever its status (a dead one is pending again,
with the whole retry schedule ahead). A running service's worker makes it within about a second.
${FOOTER}`,
};

/** `--events` as a list: `*`, or comma-separated types. */
function eventTypesOption(value: string | undefined): string[] | undefined {
  return value === undefined ? undefined : value.split(',').map((t) => t.trim()).filter((t) => t !== '');
}

/** The one positional argument `name` of a command. @throws UsageError */
function positionals(given: string[], names: readonly string[]): string[] {
  if (given.length !== names.length) throw new UsageError(`expected ${names.join(' and ')}`);
  return given;
}

function endpointTable(endpoints: readonly Endpoint[]): string {
  return formatTable(
    ['id', 'url', 'event_types', 'enabled', 'created_at'],
    endpoints.map((e) => [e.id, e.url, e.event_types.join(','), String(e.enabled), e.created_at]),
  );
}

function deliveryCells(d: Delivery): string[] {
  const error = d.last_error === null ? '-' : d.last_error.replace(/\s+/g, ' ');
  return [
    d.id,
    d.event_type,
    d.status,
    String(d.attempts),
    d.last_attempt_at ?? '-',
    d.last_status === null ? '-' : String(d.last_status),
    error.length > LAST_ERROR_COLUMN_WIDTH ? `${error.slice(0, LAST_ERROR_COLUMN_WIDTH - 1)}…` : error,
    d.next_attempt_at ?? '-',
  ];
}

/** What one command does with the service; resolves to its exit code. */
type Command = (c: { service: WebhooksService; io: DatabaseCommandIo; audit: ChangeOptions; argv: readonly string[] }) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  async add({ service, io, audit, argv }) {
    const { values } = parseCommandArgs(argv, { url: { type: 'string' }, events: { type: 'string' } }, { allowPositionals: false });
    if (values.url === undefined || values.events === undefined) throw new UsageError('--url and --events are required');
    const { webhook, secret } = await service.add({ url: values.url, eventTypes: eventTypesOption(values.events)! }, audit);
    io.stdout(endpointTable([webhook]));
    io.stdout(`Secret (shown only now; receivers verify requests with it):\n${secret}\n`);
    return EXIT_OK;
  },
  async list({ service, io, argv }) {
    parseCommandArgs(argv, {}, { allowPositionals: false });
    const endpoints = await service.list();
    io.stdout(endpoints.length === 0 ? 'No webhook endpoints.\n' : endpointTable(endpoints));
    return EXIT_OK;
  },
  async update({ service, io, audit, argv }) {
    const { values, positionals: given } = parseCommandArgs(
      argv,
      { url: { type: 'string' }, events: { type: 'string' }, enable: { type: 'boolean' }, disable: { type: 'boolean' } },
      { allowPositionals: true },
    );
    const [id] = positionals(given, ['ID']);
    if (values.enable === true && values.disable === true) throw new UsageError('--enable and --disable exclude each other');
    const enabled = values.enable === true ? true : values.disable === true ? false : undefined;
    if (values.url === undefined && values.events === undefined && enabled === undefined) throw new UsageError('nothing to change: give --url, --events, --enable or --disable');
    io.stdout(endpointTable([await service.update(id!, { url: values.url, eventTypes: eventTypesOption(values.events), enabled }, audit)]));
    return EXIT_OK;
  },
  async remove({ service, io, audit, argv }) {
    const [id] = positionals(parseCommandArgs(argv, {}, { allowPositionals: true }).positionals, ['ID']);
    await service.remove(id!, audit);
    io.stdout(`Removed webhook ${id!.toLowerCase()} and its deliveries.\n`);
    return EXIT_OK;
  },
  async 'rotate-secret'({ service, io, audit, argv }) {
    const [id] = positionals(parseCommandArgs(argv, {}, { allowPositionals: true }).positionals, ['ID']);
    const { secret } = await service.rotateSecret(id!, audit);
    io.stdout(`New secret of webhook ${id!.toLowerCase()} (shown only now; the previous one also signs for 24 hours):\n${secret}\n`);
    return EXIT_OK;
  },
  async deliveries({ service, io, argv }) {
    const { values, positionals: given } = parseCommandArgs(
      argv,
      { status: { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' } },
      { allowPositionals: true },
    );
    const [id] = positionals(given, ['ID']);
    const page = await service.listDeliveries(id!, { status: values.status, limit: values.limit, cursor: values.cursor });
    if (page.deliveries.length === 0) io.stdout('No deliveries.\n');
    else io.stdout(formatTable(['id', 'event_type', 'status', 'attempts', 'last_attempt_at', 'last_status', 'last_error', 'next_attempt_at'], page.deliveries.map(deliveryCells)));
    if (page.next_cursor !== null) io.stdout(`More: --cursor ${page.next_cursor}\n`);
    return EXIT_OK;
  },
  async retry({ service, io, audit, argv }) {
    const [id, deliveryId] = positionals(parseCommandArgs(argv, {}, { allowPositionals: true }).positionals, ['ID', 'DELIVERY_ID']);
    await service.retryDelivery(id!, deliveryId!, audit);
    io.stdout(`Delivery ${deliveryId!.toLowerCase()} is due now; a running service's worker attempts it within about a second.\n`);
    return EXIT_OK;
  },
};

/** Runs `command` with the service on the configured database; maps the service's refusals to exit codes. */
async function runCommand(name: string, command: Command, argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  return withCommandDatabase(
    io,
    async (db: Db, { config, clock }: { config: Config; clock: Clock }) => {
      if (config.databaseUrl !== undefined && config.webhookKeyFile === undefined && (name === 'add' || name === 'rotate-secret')) {
        io.stderr('Note: WEBHOOK_KEY_FILE is unset: the secret is encrypted with the key generated into this DATA_DIR; the service must read the same key.\n');
      }
      const service = createWebhooksService({ db, clock, secretKey: loadWebhookSecretKey({ dataDir: config.dataDir, webhookKeyFile: config.webhookKeyFile }) });
      // Every change is recorded in the audit log (actor CLI_ACTOR) in its transaction, as the admin API's are.
      const audited = auditedAs(CLI_ACTOR, clock);
      const changes: WebhookChange[] = [];
      const audit: ChangeOptions = {
        audit: async (tx, change) => {
          await audited.audit?.(tx, change);
          changes.push(change);
        },
      };
      try {
        const code = await command({ service, io, audit, argv });
        // The operator's trail (stderr, docs/operations.md): what changed, never a secret.
        const log = changes.length > 0 ? auditLogger(config, io) : undefined;
        for (const change of changes) log?.info({ operatorAction: change.action, webhookId: change.webhookId, details: change.details }, `latchkey webhooks ${name}`);
        return code;
      } catch (err) {
        if (!(err instanceof WebhookRequestError)) throw err;
        if (err.reason === 'validation_failed') throw new UsageError(err.message);
        io.stderr(`${err.message}\n`);
        return EXIT_ERROR;
      }
    },
    { command: `webhooks ${name}` },
  );
}

/**
 * `latchkey webhooks <add|list|update|remove|rotate-secret|deliveries|retry>`: webhook endpoint
 * management for operators, on the same service as the admin API's `/admin/v0/webhooks` routes.
 * Each change is recorded in the audit log (key_name `cli`) and logged to stderr, never a secret.
 *
 * @param argv the arguments after `webhooks`.
 * @returns 0 on success or help; 1 when the configuration is bad, the schema is behind, or the
 *   webhook or delivery does not exist; 2 on a usage error or a value the rules refuse.
 * @throws the database's error when it cannot be reached.
 */
export async function runWebhooksCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const [name, ...rest] = argv;
  const known = name !== undefined && Object.hasOwn(COMMANDS, name);
  const command = known ? COMMANDS[name] : undefined;
  const usage = known ? USAGES[name] : undefined;
  if (command !== undefined && usage !== undefined) {
    if (wantsHelp(rest)) {
      io.stdout(usage);
      return EXIT_OK;
    }
    return runWithUsage(usage, io, () => runCommand(name!, command, rest, io));
  }
  if (name !== undefined && wantsHelp([name])) {
    io.stdout(WEBHOOKS_USAGE);
    return EXIT_OK;
  }
  return runWithUsage(WEBHOOKS_USAGE, io, async () => {
    throw new UsageError(name === undefined ? 'Missing subcommand.' : `Unknown subcommand "${name}".`);
  });
}
