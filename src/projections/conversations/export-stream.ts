// The stream of one export page: FETCHes from the open server-side cursor as the consumer reads, rows written
// out as NDJSON as they arrive, the `_truncated` sentinel or `_error` line at the end, the client given back.
import { Readable } from 'node:stream';
import { type PoolClient, Query, type QueryConfig } from 'pg';
import { CHUNK_BYTES, ChunkWriter } from './export-chunk-writer';
import { LineFormatter } from './export-ndjson-line';
import { C, RAW_TYPES, type Row } from './export-query';
import { type ExportDeps, type ExportRequest } from './export-request';

export const MID_STREAM_ERROR = {
  code: 'INTERNAL_ERROR',
  message: 'the export failed after streaming began; request this page again (with the same cursor)',
};

export function ignoreConnectionError(): void {}

export function giveBack(client: PoolClient, discard?: boolean | Error): void {
  client.removeListener('error', ignoreConnectionError);
  client.release(discard);
}

/**
 * Streams the rows of the open cursor as NDJSON. Each FETCH is requested only when the consumer wants more
 * (`_read`), and its rows are formatted one by one as they arrive from the socket (pg's 'row' events, nothing
 * accumulated): every row object dies young, so memory stays flat however many rows pass.
 */
export class MessageExportStream extends Readable {
  private readonly formatter: LineFormatter;
  private readonly writer: ChunkWriter;
  private emitted = 0;
  private more = false;
  private last: Row | null = null;
  private busy = false;
  private finished = false;
  private released = false;
  private abandoned = false;
  private inflight: Promise<number> | null = null;

  constructor(
    private readonly client: PoolClient,
    private readonly hw: string,
    private readonly fetchSize: number,
    private readonly deps: ExportDeps,
    private readonly req: ExportRequest,
  ) {
    super({ highWaterMark: 128 * 1024 });
    this.formatter = new LineFormatter(deps.anonymizationSecret);
    this.writer = new ChunkWriter((chunk) => this.push(chunk));
  }

  /** The first batch, before the response starts (a failure here is the caller's to report). */
  async start(): Promise<void> {
    this.busy = true;
    const received = await this.fetch();
    await this.afterBatch(received);
  }

  /** The caller gave up before the stream was handed out (it releases the client itself). */
  abandon(): void {
    this.abandoned = true;
    this.released = true;
    this.finished = true;
  }

  override _read(): void {
    if (this.busy || this.finished) return;
    this.busy = true;
    void this.step();
  }

  private async step(): Promise<void> {
    try {
      const received = await this.fetch();
      if (this.destroyed) return;
      await this.afterBatch(received);
    } catch (err) {
      this.finished = true;
      this.deps.logger?.error({ err }, 'export failed after streaming began');
      await this.release(true);
      if (this.destroyed) return;
      const line = `${JSON.stringify({ _error: MID_STREAM_ERROR })}\n`;
      this.writer.reserve(line.length * 3);
      this.writer.utf8(line);
      this.writer.flush();
      this.push(null);
    }
  }

  /** One FETCH; its rows are written out as they arrive. Resolves with the number of rows received. */
  private fetch(): Promise<number> {
    const exportedAt = this.deps.now().toISOString();
    const p = new Promise<number>((resolve, reject) => {
      let received = 0;
      const q = new Query({ text: `FETCH ${this.fetchSize} FROM export_rows`, rowMode: 'array', types: RAW_TYPES } as QueryConfig);
      q.on('row', (row: Row) => {
        received++;
        this.onRow(row, exportedAt);
      });
      q.on('error', reject);
      q.on('end', () => resolve(received));
      this.client.query(q);
    });
    this.inflight = p;
    return p.finally(() => {
      this.inflight = null;
    });
  }

  private onRow(row: Row, exportedAt: string): void {
    if (this.destroyed || this.abandoned) return;
    if (this.emitted === this.req.limit) {
      this.more = true;
      return;
    }
    this.formatter.write(this.writer, row, exportedAt);
    this.last = row;
    this.emitted++;
    if (this.writer.length >= CHUNK_BYTES - 2048) this.writer.flush();
  }

  private async afterBatch(received: number): Promise<void> {
    if (this.more || received < this.fetchSize) {
      if (this.more) {
        const sentinel = this.sentinel();
        this.writer.reserve(sentinel.length);
        this.writer.ascii(sentinel);
      }
      this.finished = true;
      await this.release(false);
      if (this.destroyed || this.abandoned) return;
      this.writer.flush();
      this.push(null);
      return;
    }
    this.busy = false;
    if (this.writer.length > 0) this.writer.flush();
    // nothing pushed (the whole batch went out in chunks already): the stream still expects an answer to its read
    else this.push('');
  }

  private sentinel(): string {
    const last = this.last!;
    const cursor = this.deps.cursors.encode(
      { hw: this.hw, after: { occurredAt: last[C.occurredAt]!, companyId: Number(last[C.companyId]), messageId: last[C.messageId]! } },
      this.req.filters,
    );
    return `{"_truncated":true,"next_cursor":"${cursor}"}\n`;
  }

  /** Ends the transaction and gives the client back (a failed one is discarded). Once. */
  private async release(failed: boolean): Promise<void> {
    if (this.released) return;
    this.released = true;
    if (failed) {
      giveBack(this.client, true);
      return;
    }
    try {
      await this.client.query('COMMIT');
      giveBack(this.client);
    } catch (err) {
      giveBack(this.client, err as Error);
    }
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    // The HTTP client went away (or the stream failed): roll back once any FETCH in flight has returned.
    if (!this.released) {
      const inflight = this.inflight ?? Promise.resolve(0);
      void inflight
        .catch(() => 0)
        .then(async () => {
          if (this.released) return;
          this.released = true;
          try {
            await this.client.query('ROLLBACK');
            giveBack(this.client);
          } catch (e) {
            giveBack(this.client, e as Error);
          }
        });
    }
    callback(err);
  }
}
