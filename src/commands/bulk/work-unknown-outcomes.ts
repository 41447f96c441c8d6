// Failed recipients whose outcome is unknown: the provider may have taken the message (the dispatcher died with the
// send at the provider, the call timed out, the connection was lost, or it failed unexpectedly). They are never
// sent again, and they keep counting in their number's rolling 24 h quota window, from their claim, as if sent
// (docs/bulk.md, "Crashes and leases"). A provider refusal sent nothing: not among them.

import { OUTCOME_UNKNOWN_CODES } from '../../events/bulk';

/**
 * The error codes of such recipients (`interrupted`: the lease sweep's, src/commands/bulk/work-outcomes.ts); defined
 * with the events, since the accounts read model counts them from `BulkRecipientsRejected` too.
 */
export { OUTCOME_UNKNOWN_CODES };

/**
 * The rows of `bulk_work.recipients` (alias `w`) whose outcome is unknown: the predicate of the partial index
 * `recipients_outcome_unknown` (migrations 0016 and 0017), written the same, so that the planner uses that index.
 */
export const outcomeUnknownSql = (w: string): string =>
  `${w}.state = 'failed' AND ${w}.error_code IN (${OUTCOME_UNKNOWN_CODES.map((c) => `'${c}'`).join(', ')})`;

/**
 * SQL of the recipients (E.164, column `recipient`) of number `n` whose outcome is unknown, claimed after `since`:
 * what the quota counts of the bulk claims and of the single sends' gate add to the window.
 */
export const outcomeUnknownRecipientsSql = (n: string, since: string): string =>
  `SELECT w.e164 AS recipient, w.claimed_at AS t FROM bulk_work.recipients w
    WHERE w.number_id = ${n} AND ${outcomeUnknownSql('w')} AND w.claimed_at > ${since}`;
