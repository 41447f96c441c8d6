import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { Position } from '../ports/event-store';
import type { Command } from 'commander';
import { catchUpConversations, ConversationRecorder } from '../commands/conversation/handler';
import type { MessageToRecord } from '../commands/conversation/decider';
import { parseMessageRecord } from '../commands/conversation/message-input';
import type { Services } from '../services';
import { openInputFile } from './input-file';
import { withCliRuntime } from './runtime';

// `switchboard import-messages FILE`: chat messages of `../shared/contracts/conversation-messages.md`, one JSON object
// per line (FILE `-` reads stdin). Every line is judged on its own: a rejected line is reported on stderr with
// its line number and reason, and the valid lines around it are still recorded. Idempotent: importing the
// same file again records nothing. Summary on stdout: `recorded N, unchanged M, rejected K`; exit status 1
// when any line was rejected.

export interface ImportIo {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
  /** show progress (stderr is a terminal) */
  progress: boolean;
}

export interface ImportSummary {
  lines: number;
  recorded: number;
  unchanged: number;
  rejected: number;
}

export interface ImportOptions {
  /** lines decided and appended together (default 500) */
  batchSize?: number;
  /** how long the conversations read model may take to catch up before the import warns (default 60 s) */
  catchUpMs?: number;
}

export async function importMessages(
  services: Services,
  input: Readable,
  io: ImportIo,
  options: ImportOptions = {},
): Promise<ImportSummary> {
  const batchSize = options.batchSize ?? 500;
  let lastPosition: Position | undefined;
  const recorder = new ConversationRecorder(services);
  const correlationId = randomUUID();
  const summary: ImportSummary = { lines: 0, recorded: 0, unchanged: 0, rejected: 0 };
  let batch: Array<{ line: number; message: MessageToRecord }> = [];
  let rejections: Array<{ line: number; reason: string }> = [];

  const reportProgress = () => {
    if (io.progress) {
      io.stderr.write(`\r\x1b[2K${summary.lines} lines: recorded ${summary.recorded}, unchanged ${summary.unchanged}, rejected ${summary.rejected}`);
    }
  };
  const reject = (line: number, reason: string) => {
    summary.rejected++;
    rejections.push({ line, reason });
  };
  const flush = async () => {
    if (batch.length > 0) {
      const { outcomes, position } = await recorder.record(batch.map((b) => b.message), { actor: 'cli', correlationId });
      if (position !== undefined) lastPosition = position;
      outcomes.forEach((o, i) => {
        if (o.status === 'rejected') reject(batch[i].line, `${o.code}: ${o.reason}`);
        else if (o.status === 'unchanged') summary.unchanged++;
        else summary.recorded++;
      });
      batch = [];
    }
    if (rejections.length > 0) {
      if (io.progress) io.stderr.write('\r\x1b[2K');
      for (const r of rejections.sort((a, b) => a.line - b.line)) io.stderr.write(`line ${r.line}: rejected: ${r.reason}\n`);
      rejections = [];
    }
    reportProgress();
  };

  const lines = createInterface({ input, crlfDelay: Infinity });
  let lineNo = 0;
  for await (let text of lines) {
    lineNo++;
    // a file saved with a UTF-8 byte-order mark (Notepad, PowerShell 5's utf8): readline keeps it on the first line
    if (lineNo === 1 && text.startsWith('\ufeff')) text = text.slice(1);
    if (text.trim() === '') continue;
    summary.lines++;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      reject(lineNo, `invalid JSON: ${(err as Error).message}`);
      continue;
    }
    const parsed = parseMessageRecord(value);
    if (!parsed.ok) reject(lineNo, parsed.reason);
    else batch.push({ line: lineNo, message: parsed.message });
    if (batch.length >= batchSize) await flush();
  }
  await flush();
  if (io.progress) io.stderr.write('\r\x1b[2K');

  // the export and the contact lookup read what was just recorded
  try {
    await catchUpConversations(services, { until: lastPosition, timeoutMs: options.catchUpMs ?? 60_000 });
  } catch (err) {
    io.stderr.write(
      `switchboard: warning: the conversations read model has not caught up yet (${(err as Error).message}); the export and the contact lookup `
      + 'show the imported messages once it has (`switchboard projections status` shows its lag)\n',
    );
  }
  io.stdout.write(`recorded ${summary.recorded}, unchanged ${summary.unchanged}, rejected ${summary.rejected}\n`);
  return summary;
}

export function registerImportMessagesCommands(program: Command): void {
  program
    .command('import-messages')
    .description('record chat messages from an NDJSON file (../shared/contracts/conversation-messages.md); FILE - reads stdin')
    .argument('<file>', 'NDJSON file, one message record per line')
    .action(async (file: string) => {
      // fail early and plainly on a file that cannot be read, before starting the runtime
      const input = file === '-' ? process.stdin : (await openInputFile(file, { empty: 'no message records to import' })).createReadStream();
      await withCliRuntime(
        async (services) => {
          const summary = await importMessages(services, input, { stdout: process.stdout, stderr: process.stderr, progress: process.stderr.isTTY === true });
          // set before the runtime stops: withCliRuntime exits with it (after, the embedded Postgres's exit hook made it 0)
          if (summary.rejected > 0) process.exitCode = 1;
        },
        'the messages recorded so far stay recorded: import the same file again to record the rest (a message already recorded is unchanged)',
      );
    });
}
