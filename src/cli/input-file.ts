import { type FileHandle, open, stat } from 'node:fs/promises';
import { CliUsageError } from './failure';

// A file the operator names as a command's input (`seed FILE`, `import-messages FILE`): opened before the command
// starts anything, so that a wrong path is one line naming the file and what is wrong with it, not Node's error.

const REASONS: Record<string, string> = {
  ENOENT: 'no such file',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EACCES: 'permission denied (this user may not read it)',
  EPERM: 'permission denied (this user may not read it)',
  EISDIR: 'a folder, not a file',
  ELOOP: 'too many symbolic links',
};

/** What the command's line says after the problem: what the file should be (`; FIX`), and what an empty one means. */
export interface InputFileHelp {
  fix?: string;
  empty: string;
  /**
   * Whether a pipe, a FIFO or a device is taken (`seed /dev/stdin`, `seed <(generate)`): read to its end, waiting
   * for a writer as any reader does. Otherwise refused at once, before opening (opening a FIFO waits for a writer).
   */
  pipes?: boolean;
}

/**
 * Opens `path` for reading: a regular file with something in it (or a pipe, when `help.pipes`). Otherwise a
 * CliUsageError: `cannot read PATH: REASON` or `PATH is empty: ...`, followed by `; FIX` when the command gives one.
 */
export async function openInputFile(path: string, help: InputFileHelp): Promise<FileHandle> {
  const refuse = (problem: string) => new CliUsageError(`${problem}${help.fix ? `; ${help.fix}` : ''}`);
  const unreadable = (err: NodeJS.ErrnoException) => refuse(`cannot read ${path}: ${REASONS[err.code ?? ''] ?? err.message}`);
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    throw unreadable(err);
  });
  if (info.isDirectory()) throw refuse(`cannot read ${path}: ${REASONS.EISDIR}`);
  if (!info.isFile() && !help.pipes) throw refuse(`cannot read ${path}: not a regular file`);
  const handle = await open(path, 'r').catch((err: NodeJS.ErrnoException) => {
    throw unreadable(err);
  });
  if (!info.isFile() || info.size > 0) return handle;
  await handle.close();
  throw refuse(`${path} is empty: ${help.empty}`);
}
