import { EventEmitter } from 'node:events';

/**
 * In-process wake-ups for the bulk dispatchers of this process (other processes poll): `kick` when a bulk was
 * created or work was freed, `cancel` (bulkId) when a bulk was cancelled, so a dispatcher stops mid-window.
 */
export const bulkSignals = new EventEmitter();
bulkSignals.setMaxListeners(0);

export const kickDispatchers = (): void => void bulkSignals.emit('kick');
export const signalCancel = (bulkId: string): void => void bulkSignals.emit('cancel', bulkId);

/**
 * A cancel for every process: `requestCancel` notifies this channel (payload: the bulk id) in the statement that
 * sets the job's cancel flag, and every dispatcher LISTENs, so one of another process stops mid-window too.
 */
export const BULK_CANCEL_CHANNEL = 'bulk_cancel_requested';
