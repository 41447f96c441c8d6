// The bulk-send aggregate (stream bulk-{bulkId}): its lifecycle only. Per-recipient state lives in the chunk
// streams (bulkchunk-{bulkId}-{n}) and in the dispatcher's work table, so this stream stays a handful of
// events long whatever the number of recipients. Pure: ids, time and counts come in on the commands.
//
//   (none) --CreateBulkSend--> QUEUED --StartBulkSend--> PROCESSING --FinishBulkSend--> COMPLETED | PARTIAL | FAILED
//   PROCESSING: PauseBulkSend / ResumeBulkSend toggle `paused` (quota); the status stays PROCESSING.
//   QUEUED | PROCESSING --CancelBulkSend--> CANCELLED; cancelling a finished or cancelled bulk is refused.
//   Start, pause, resume and finish are idempotent (several dispatchers may race to record them).
import { type Decider, DomainError } from '../decider';
import type { BulkEvent, BulkEventData } from '../../events/bulk';

export const bulkStreamId = (bulkId: string): string => `bulk-${bulkId}`;
export const chunkStreamId = (bulkId: string, chunk: number): string => `bulkchunk-${bulkId}-${chunk}`;

const CHUNK_STREAM = /^bulkchunk-([0-9a-f-]{36})-(\d+)$/;
export function parseChunkStreamId(streamId: string): { bulkId: string; chunk: number } | undefined {
  const m = CHUNK_STREAM.exec(streamId);
  return m ? { bulkId: m[1], chunk: Number(m[2]) } : undefined;
}

export type BulkStatus = 'QUEUED' | 'PROCESSING' | 'COMPLETED' | 'PARTIAL' | 'FAILED' | 'CANCELLED';
export const BULK_STATUSES: readonly BulkStatus[] = ['QUEUED', 'PROCESSING', 'COMPLETED', 'PARTIAL', 'FAILED', 'CANCELLED'];
export const isTerminal = (s: BulkStatus): boolean => s !== 'QUEUED' && s !== 'PROCESSING';

export type BulkLifecycleEvent = Extract<
  BulkEvent,
  { type: 'BulkSendCreated' | 'BulkSendStarted' | 'BulkSendPaused' | 'BulkSendResumed' | 'BulkSendCancelled' | 'BulkSendFinished' }
>;

export type BulkCommand =
  | { type: 'CreateBulkSend'; data: BulkEventData<'BulkSendCreated'> }
  | { type: 'StartBulkSend'; data: { bulkId: string; dispatcherId: string; at: string } }
  | { type: 'PauseBulkSend'; data: { bulkId: string; quotaUsed: number; quotaLimit: number; resumeAt: string | null; at: string } }
  | { type: 'ResumeBulkSend'; data: { bulkId: string; at: string } }
  | { type: 'CancelBulkSend'; data: { bulkId: string; cancelledBy: string; at: string } }
  | { type: 'FinishBulkSend'; data: { bulkId: string; dispatchedCount: number; rejectedCount: number; at: string } };

export type BulkState =
  | { kind: 'none' }
  | { kind: 'created'; bulkId: string; companyId: number; status: BulkStatus; paused: boolean };

/** COMPLETED: no failures; FAILED: nothing was accepted; PARTIAL: some of each. */
export function finalStatus(dispatched: number, rejected: number): 'COMPLETED' | 'PARTIAL' | 'FAILED' {
  if (rejected === 0) return 'COMPLETED';
  return dispatched === 0 ? 'FAILED' : 'PARTIAL';
}

function decide(command: BulkCommand, state: BulkState): BulkLifecycleEvent[] {
  if (command.type === 'CreateBulkSend') {
    if (state.kind !== 'none') throw new DomainError('BULK_EXISTS', `bulk send ${command.data.bulkId} already exists`);
    return [{ type: 'BulkSendCreated', data: command.data }];
  }
  if (state.kind === 'none') throw new DomainError('BULK_NOT_FOUND', `bulk send ${command.data.bulkId} does not exist`);
  const base = { bulkId: state.bulkId, companyId: state.companyId };
  switch (command.type) {
    case 'StartBulkSend':
      return state.status === 'QUEUED'
        ? [{ type: 'BulkSendStarted', data: { ...base, dispatcherId: command.data.dispatcherId, at: command.data.at } }]
        : [];
    case 'PauseBulkSend': {
      if (state.status !== 'PROCESSING' || state.paused) return [];
      const { quotaUsed, quotaLimit, resumeAt, at } = command.data;
      return [{ type: 'BulkSendPaused', data: { ...base, reason: 'quota', quotaUsed, quotaLimit, resumeAt, at } }];
    }
    case 'ResumeBulkSend':
      return state.status === 'PROCESSING' && state.paused ? [{ type: 'BulkSendResumed', data: { ...base, at: command.data.at } }] : [];
    case 'CancelBulkSend':
      if (isTerminal(state.status)) {
        throw new DomainError('BULK_FINISHED', `Bulk send ${state.bulkId} is already ${state.status} and cannot be cancelled.`, { status: state.status });
      }
      return [{ type: 'BulkSendCancelled', data: { ...base, cancelledBy: command.data.cancelledBy, at: command.data.at } }];
    case 'FinishBulkSend': {
      if (isTerminal(state.status)) return [];
      const { dispatchedCount, rejectedCount, at } = command.data;
      return [{ type: 'BulkSendFinished', data: { ...base, status: finalStatus(dispatchedCount, rejectedCount), dispatchedCount, rejectedCount, at } }];
    }
  }
}

function evolve(state: BulkState, event: BulkLifecycleEvent): BulkState {
  if (event.type === 'BulkSendCreated') {
    return { kind: 'created', bulkId: event.data.bulkId, companyId: event.data.companyId, status: 'QUEUED', paused: false };
  }
  if (state.kind === 'none') return state;
  switch (event.type) {
    case 'BulkSendStarted':
      return state.status === 'QUEUED' ? { ...state, status: 'PROCESSING' } : state;
    case 'BulkSendPaused':
      return { ...state, paused: true };
    case 'BulkSendResumed':
      return { ...state, paused: false };
    case 'BulkSendCancelled':
      return { ...state, status: 'CANCELLED', paused: false };
    case 'BulkSendFinished':
      return { ...state, status: event.data.status, paused: false };
  }
}

export const bulkDecider: Decider<BulkCommand, BulkLifecycleEvent, BulkState> = {
  decide,
  evolve,
  initialState: () => ({ kind: 'none' }),
};

// ---- delivery statuses of one recipient (pure; same rules as single sends) ----

export type RecipientStatus = 'pending' | 'sent' | 'delivered' | 'read' | 'failed';
export type NotificationStatus = 'sent' | 'delivered' | 'read' | 'failed';

/**
 * The statuses to record for a provider notification, given the recipient's current status: monotonic
 * (sent < delivered < read; failed from sent or delivered); a `read` without `delivered` implies delivered;
 * duplicates, a late `sent` and anything after read/failed record nothing. `pending` (the read model has not
 * yet applied the dispatch) is treated as `sent`: the projection enforces the same order anyway.
 */
export function recipientStatusChanges(current: RecipientStatus, status: NotificationStatus): Array<{ status: 'delivered' | 'read' | 'failed'; implied: boolean }> {
  const now = current === 'pending' ? 'sent' : current;
  if (now === 'read' || now === 'failed') return [];
  switch (status) {
    case 'sent':
      return [];
    case 'delivered':
      return now === 'sent' ? [{ status: 'delivered', implied: false }] : [];
    case 'read':
      return now === 'sent'
        ? [{ status: 'delivered', implied: true }, { status: 'read', implied: false }]
        : [{ status: 'read', implied: false }];
    case 'failed':
      return [{ status: 'failed', implied: false }];
  }
}
