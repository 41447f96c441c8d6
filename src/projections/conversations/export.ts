import { type Readable } from 'node:stream';
import { buildExportQuery } from './export-query';
import { type ExportDeps, type ExportRequest } from './export-request';
import { giveBack, ignoreConnectionError, MessageExportStream } from './export-stream';
import { CONVERSATIONS_SCHEMA } from './projection';

// The qualitative export's query and stream (GET /api/v1/qualitative-export/messages; docs/export.md).
// Rows come from a server-side cursor (DECLARE … / FETCH n in a read-only transaction); the next FETCH is sent
// only when the HTTP response wants more (Readable backpressure), and each row is written as an NDJSON line
// into byte chunks the moment it arrives: memory stays flat in the number of rows. Postgres assembles the
// parts of a line that need no anonymization (JSON escaping included); Node adds the anonymized ids and the
// metadata. Values arrive as raw text (no per-column parsing).
// The parts live beside this file: export-request.ts (request, deps, channel groups), export-query.ts (the page
// query, row shape), export-chunk-writer.ts (NDJSON into Buffers), export-ndjson-line.ts (one anonymized line),
// export-stream.ts (the page's stream). This file opens a page.

export { isoFromPg } from './export-chunk-writer';
export { SCHEMA_VERSION } from './export-ndjson-line';
export { buildExportQuery } from './export-query';
export { CHANNEL_GROUPS, type ExportDeps, type ExportInclude, type ExportLogger, type ExportRequest } from './export-request';
export { MID_STREAM_ERROR } from './export-stream';

/**
 * The page's transaction waits for its HTTP client between FETCHes, so it may idle longer than the pools' 30 s: up to
 * this. The route ends a page whose client read nothing for 10 min (EXPORT_MAX_STALL_MS) first; this is the backstop
 * for a process frozen with a page open, and bounds how long a client may take to read one FETCH's rows.
 */
export const PAGE_IDLE_IN_TRANSACTION = '15min';

/**
 * Opens a page of the export: the transaction, the snapshot bound, the cursor and the first batch are done
 * before anything is sent, so a failure up to there is an ordinary HTTP error. The returned stream owns the
 * database client: it releases it when the page ends, fails, or the stream is destroyed (client gone).
 */
export async function openMessageExport(deps: ExportDeps, req: ExportRequest): Promise<Readable> {
  const fetchSize = deps.fetchSize ?? 1000;
  const client = await deps.pool.connect();
  // A connection lost while no query runs (the client idles between FETCHes while the HTTP client reads) is
  // reported as an 'error' event on the checked-out client: without a listener it would crash the process.
  // The next FETCH then fails and ends the stream with an `_error` line.
  client.on('error', ignoreConnectionError);
  let stream: MessageExportStream | undefined;
  try {
    await client.query(
      `BEGIN READ ONLY; SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO';
       SET LOCAL idle_in_transaction_session_timeout = '${PAGE_IDLE_IN_TRANSACTION}'`,
    );
    const hw =
      req.cursor?.hw ??
      (await client.query<{ hw: string }>(`SELECT COALESCE(max(seq), 0)::text AS hw FROM ${CONVERSATIONS_SCHEMA}.messages`)).rows[0].hw;
    const q = buildExportQuery(req, hw);
    await client.query(`DECLARE export_rows NO SCROLL CURSOR FOR ${q.text}`, q.values);
    stream = new MessageExportStream(client, hw, fetchSize, deps, req);
    await stream.start();
    return stream;
  } catch (err) {
    if (stream) stream.abandon();
    await client.query('ROLLBACK').then(
      () => giveBack(client),
      () => giveBack(client, true),
    );
    throw err;
  }
}
