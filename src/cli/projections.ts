import type { Command } from 'commander';
import { CliUsageError } from './failure';
import { allProjections, projectionByName } from '../projections/registry';
import { interruptedRebuildNote, RebuildRunningError, rebuildInterrupted, rebuildProjection, rebuildRunning, stoppedRebuildNote } from '../projections/rebuild';
import { readCheckpoints } from '../projections/store';
import { progress, progressDone, withCliRuntime } from './runtime';

/**
 * The code's version, and the stored one when it differs: a version change's rebuild is pending (the next `serve` or
 * `worker` runs it) or running.
 */
const versionCell = (version: number, stored: number | null): string =>
  stored === null || stored === version ? String(version) : `${version} (stored ${stored})`;

export function registerProjectionCommands(program: Command): void {
  const projections = program.command('projections').description('read models: status and zero-downtime rebuild');

  projections
    .command('status')
    .description('position, lag (events behind head) and state of each projection')
    .option('--json', 'one JSON object per line')
    .action((opts: { json?: boolean }) =>
      withCliRuntime(async (s) => {
        const checkpoints = new Map((await readCheckpoints(s.pool)).map((c) => [c.name, c]));
        const rows = [];
        for (const p of allProjections) {
          const cp = checkpoints.get(p.name);
          const lag = cp ? await s.store.countAfter(cp.position) : await s.store.countAfter('' as never);
          // the guard, not the stored state, says whether a rebuild runs (a killed one leaves `rebuilding`)
          const interrupted = await rebuildInterrupted(s.pool, p);
          const rebuilding = !interrupted && (await rebuildRunning(s.pool, p.name));
          rows.push({
            name: p.name,
            version: p.version,
            storedVersion: cp?.version ?? null,
            position: cp?.position || '(start)',
            lag,
            state: interrupted ? 'rebuild interrupted' : rebuilding ? 'rebuilding' : (cp?.state ?? 'not created'),
            error: interrupted ? interruptedRebuildNote(p) : (cp?.error ?? null),
          });
        }
        if (opts.json) for (const r of rows) process.stdout.write(`${JSON.stringify(r)}\n`);
        else {
          const versions = rows.map((r) => versionCell(r.version, r.storedVersion));
          const width = Math.max('version'.length, ...versions.map((v) => v.length)) + 2;
          process.stdout.write(`${'projection'.padEnd(16)}${'version'.padEnd(width)}${'position'.padEnd(22)}${'lag'.padEnd(10)}state\n`);
          rows.forEach((r, i) => {
            process.stdout.write(
              `${r.name.padEnd(16)}${versions[i].padEnd(width)}${r.position.padEnd(22)}${String(r.lag).padEnd(10)}${r.state}${r.error ? ` (${r.error})` : ''}\n`,
            );
          });
        }
      }),
    );

  projections
    .command('rebuild')
    .argument('<name>', `one of: ${allProjections.map((p) => p.name).join(', ')}`)
    .description('rebuild into fresh tables from position zero while the old ones serve, then swap')
    .action((name: string) => {
      const p = projectionByName(name);
      if (!p) throw new CliUsageError(`unknown projection ${name}; known: ${allProjections.map((x) => x.name).join(', ')}`);
      return withCliRuntime(async (s) => {
        const started = Date.now();
        // the runner's reader: an event its schema refuses stops only the rebuild of a projection that handles its type
        const result = await rebuildProjection(s.pool, s.runner.reader, p, {
          onProgress: (r) => progress(`rebuilding ${name}: ${r.read} events read, ${r.applied} applied`),
        }).catch((err: unknown) => {
          if (!(err instanceof RebuildRunningError)) throw err;
          throw new CliUsageError(`${err.message} in another process (a version change's, or another \`projections rebuild\`); wait for it to end (\`switchboard projections status\`), then run the command again if it is still needed`);
        });
        progressDone();
        const secs = (Date.now() - started) / 1000;
        process.stdout.write(
          `rebuilt ${name} v${p.version}: ${result.read} events read, ${result.applied} applied in ${secs.toFixed(1)} s (${Math.round(result.read / Math.max(secs, 0.001))} events/s), swapped at ${result.position || '(start)'}\n`,
        );
      }, stoppedRebuildNote(p));
    });
}
