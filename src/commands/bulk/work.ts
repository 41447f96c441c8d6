// The dispatcher's work table (bulk_work.*, migration 0003_bulk.sql) and the events derived from it
// (docs/bulk.md, "Dispatcher"). Command-side state: written only by the bulk commands, the dispatcher and the
// lease sweep. Every outcome is written here first, in the same statement as its outcome batch (per window,
// chunk and kind); the batch is then appended as one event whose id is derived from the batch, and deleted.
// A crash in between leaves the batch, which the next flush appends again (the event store recognises the
// re-append), so every recipient ends up in exactly one outcome event.
//
// Split along its jobs (issue #17); every name stays importable from here:
// - work-jobs.ts: job rows (draft, state, pause, heartbeat, cancel, which numbers and jobs have work)
// - work-number-leases.ts: number leases (pacing of spaced tiers across processes)
// - work-materialize.ts: chunk streams copied into work rows
// - work-claims.ts: claims (pending → in_flight), with and without the daily quota
// - work-outcomes.ts: outcomes, outcome batches and their events, the lease sweep's interrupted outcomes
// - work-recipient-queries.ts: a job's progress, the owner of a provider message id
export {
  type JobRow,
  type JobState,
  cancelRequestedAmong,
  getJob,
  heartbeat,
  insertDraftJob,
  nextJobOfNumber,
  numbersWithWork,
  requestCancel,
  setJobPaused,
  setJobState,
} from './work-jobs';
export { acquireNumberLease, releaseNumberLease, releaseNumberLeaseAtSlot } from './work-number-leases';
export { materializeChunks } from './work-materialize';
export { type ClaimArgs, type ClaimedRecipient, type QuotaClaim, claimRecipients, claimRecipientsWithQuota } from './work-claims';
export {
  INTERRUPTED_CODE,
  INTERRUPTED_MESSAGE,
  type Outcome,
  type OutcomeBatch,
  appendBatches,
  batchEventId,
  flushBatches,
  resolveExpiredInFlight,
  writeOutcomes,
} from './work-outcomes';
export { type JobProgress, findWorkRecipientByProviderId, jobProgress } from './work-recipient-queries';
