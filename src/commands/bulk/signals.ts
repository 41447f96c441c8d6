import { EventEmitter } from 'node:events';

/**
 * In-process wake-ups for the bulk dispatchers of this process (other processes poll): `kick` when a bulk was
 * created or work was freed, `cancel` (bulkId) when a bulk was cancelled, so a dispatcher stops mid-window.
 */
export const bulkSignals = new EventEmitter();
bulkSignals.setMaxListeners(0);

export const kickDispatchers = (): void => void bulkSignals.emit('kick');
export const signalCancel = (bulkId: string): void => void bulkSignals.emit('cancel', bulkId);
