/** What `channelkit --help` prints, and what follows the envelope of a usage error. */
export const USAGE = `Usage: channelkit <command> [options]

Commands:
  serve [--port 3000] [--host 127.0.0.1] [--demo] [--turn-lease-ms 30000] [--admin-dev-mode]
        [--livechat inbox|bridge|off] [--log-format pretty|json] [--drain-ms 10000] [--rate-limits JSON|off] [--trust-proxy N]
        [--streams-per-key 1000|off] [--streams-per-address 100|off] [--max-connections N|off]
        [--access-log] [--otel] [--pg-pool-size 10] [--pg-statement-timeout-ms 5000] [--pg-connection-timeout-ms 5000]
        [--headers-timeout-ms 10000] [--request-timeout-ms 30000] [--keep-alive-timeout-ms 5000]
        [--retention-interval-ms 3600000|off]
  migrate
  tenant create --name NAME
  tenant list
  channel create --tenant ID --flow NAME [--type api|webhook|TYPE] [--environment prod|dev|staging]
                 [--mode server|public] [--allowed-origin ORIGIN]... [--default-stream]
                 [--require-signature] [--resumable-streams] [--languages en_US,fr_FR] [--name NAME]
                 [--retention-days N] [--settings JSON] [--setting NAME=VALUE]...
  channel list [--tenant ID]
  channel show ID
  channel update ID [--state active|inactive|archived] [--environment prod|dev|staging]
                 [--allowed-origin ORIGIN]... [--default-stream true|false]
                 [--require-signature true|false] [--flow NAME] [--name NAME]
                 [--languages en_US,fr_FR] [--widget JSON] [--livechat JSON]
                 [--run-timeout-seconds 300] [--retention-days N|off] [--rate-limits JSON] [--resumable-streams true|false]
                 [--settings JSON] [--setting NAME=VALUE]...
  channel rotate-key ID
  channel rotate-signing-secret ID
  conversation list [--tenant ID] [--channel ID] [--since TIME] [--until TIME] [--end-user ID]
                    [--limit 50] [--cursor C]
  conversation export [--tenant ID] [--channel ID] [--conversation ID] [--since TIME] [--until TIME]
                      [--end-user ID]
  conversation delete ID
  conversation sweep
  end-user erase ID [--tenant ID]
  secrets reseal
  backup FILE [--force]
  admin-token --tenant ID [--tenants A,B] [--org ID] [--expires 1h]
  audit [--tenant ID] [--channel ID] [--limit 50] [--cursor C]

Every command takes --config PATH (default: channelkit.config.{ts,mts,mjs,js} in the working
directory, when there is one: your service's storage, flows and plugins) and
--db <sqlite file | postgres:// URL> (without a config or a storage in it: $CHANNELKIT_DB, else
./channelkit.db, with the demo flows). It prints JSON on stdout, and an error as
{"error":{"code","message"}} on stderr (exit code 1; 2 for a bad command line).

Environment:
  CHANNELKIT_SECRET_KEY        master key sealing signing secrets and secret settings (openssl rand -hex 32)
  CHANNELKIT_SECRET_KEY_FALLBACKS  earlier master keys, comma-separated: they still open what they sealed,
                               while \`secrets reseal\` seals it again under CHANNELKIT_SECRET_KEY
  CHANNELKIT_ADMIN_JWT_SECRET  HS256 secret of admin tokens (at least 32 characters)
  CHANNELKIT_ADMIN_JWKS_URL    JWKS of an identity provider whose RS256/ES256 tokens serve accepts
  CHANNELKIT_ADMIN_JWT_ISSUER, CHANNELKIT_ADMIN_JWT_AUDIENCE  accepted iss and aud (comma-separated)`;
