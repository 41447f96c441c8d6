#!/usr/bin/env node
// The Dockerfile's build, without a Docker engine: reads the Dockerfile, builds the context the way `docker build`
// does (.dockerignore applied), runs the `build` stage's COPY and RUN instructions in a fresh directory standing in
// for its WORKDIR, then assembles the runtime stage's WORKDIR from its `COPY --from=build` instructions.
//
//   node scripts/docker-steps.mjs [--context DIR] [--out DIR]
//
// Prints one JSON line per step ({step, ...}) and a last line {result: {appDir, env, command}}: the runtime
// tree, the runtime stage's ENV and its ENTRYPOINT + CMD. The runtime stage's RUN lines (absolute paths, chown to
// the image's `node` user) cannot run here; they are reported as skipped. npm runs with prefer-offline, so a warm
// npm cache makes `npm ci` fast and an empty one falls back to the registry.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Instructions per stage; continuation lines joined, comments and parser directives dropped. */
export function parseDockerfile(text) {
  const logical = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (pending === '' && /^\s*#/.test(line)) continue;
    if (pending !== '' && /^\s*#/.test(line)) continue; // comment lines inside a continuation are ignored
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    if (full) logical.push(full);
  }
  const stages = [];
  for (const l of logical) {
    const [, keyword, rest] = /^(\S+)\s*(.*)$/s.exec(l);
    const kind = keyword.toUpperCase();
    if (kind === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest.trim());
      stages.push({ name: m[2] ?? String(stages.length), base: m[1], instructions: [] });
    } else {
      if (!stages.length) throw new Error(`Dockerfile: ${kind} before FROM`);
      stages.at(-1).instructions.push({ kind, args: rest.replace(/\s+/g, ' ').trim() });
    }
  }
  return stages;
}

/** `COPY [--flag=v ...] src... dest` or the JSON form. */
function copyArgs(args) {
  const words = args.startsWith('[') ? JSON.parse(args) : args.split(' ');
  const flags = {};
  while (words[0]?.startsWith('--')) {
    const [k, v] = words.shift().slice(2).split('=');
    flags[k] = v ?? 'true';
  }
  return { flags, sources: words.slice(0, -1), dest: words.at(-1) };
}

function envArgs(args) {
  const env = {};
  for (const m of args.matchAll(/(\w+)=("[^"]*"|\S*)/g)) env[m[1]] = m[2].replace(/^"|"$/g, '');
  return env;
}

const execForm = (args) => (args.startsWith('[') ? JSON.parse(args) : ['/bin/sh', '-c', args]);

/** .dockerignore: Go filepath.Match patterns with `**`, `!` exceptions, last match wins; a path is also excluded by its parent. */
export function dockerignoreMatcher(text) {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = posix.normalize((negate ? l.slice(1) : l).trim().replace(/^\/+/, '')).replace(/\/+$/, '');
      const source = pattern
        .split('/')
        .map((seg) => (seg === '**' ? '.*' : seg.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')))
        .join('/')
        .replace(/\.\*\//g, '(?:.*/)?');
      return { negate, re: new RegExp(`^${source}$`) };
    });
  return (path) => {
    const parts = path.split('/');
    const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const r of rules) if (prefixes.some((p) => r.re.test(p))) excluded = !r.negate;
    return excluded;
  };
}

function listFiles(root, rel = '') {
  const out = [];
  for (const e of readdirSync(join(root, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...listFiles(root, p));
    else out.push(p);
  }
  return out;
}

/** COPY from the build context: each source must exist and not be excluded by .dockerignore. */
function copyFromContext(context, ignored, sources, dest, stageDir) {
  const destDir = join(stageDir, dest);
  for (const src of sources) {
    const rel = posix.normalize(src).replace(/\/+$/, '');
    const abs = join(context, rel);
    if (!existsSync(abs) || ignored(rel)) {
      throw new Error(`COPY ${src}: file not found in build context or excluded by .dockerignore`);
    }
    if (statSync(abs).isDirectory()) {
      // `COPY dir dest` copies the directory's contents into dest
      for (const f of listFiles(abs)) {
        if (ignored(`${rel}/${f}`)) continue;
        mkdirSync(dirname(join(destDir, f)), { recursive: true });
        cpSync(join(abs, f), join(destDir, f));
      }
    } else {
      const target = dest.endsWith('/') || sources.length > 1 ? join(destDir, posix.basename(rel)) : destDir;
      mkdirSync(dirname(target), { recursive: true });
      cpSync(abs, target);
    }
  }
}

/** The environment a RUN sees: the image's (PATH, HOME) plus the stage's ENV, not the caller's. */
function stageEnv(stageVars) {
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...stageVars, npm_config_prefer_offline: 'true' };
}

function run(command, cwd, env) {
  if (/\bnpm cache clean\b/.test(command)) {
    throw new Error(`RUN ${command}: would empty this machine's npm cache; the build stage is discarded, so it is not needed there`);
  }
  const r = spawnSync('/bin/sh', ['-c', command], { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`RUN ${command}: exit ${r.status}\n${`${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-40).join('\n')}`);
}

const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

export function dockerSteps({ context, out }) {
  const stages = parseDockerfile(readFileSync(join(context, 'Dockerfile'), 'utf8'));
  const ignoreFile = join(context, '.dockerignore');
  const ignored = dockerignoreMatcher(existsSync(ignoreFile) ? readFileSync(ignoreFile, 'utf8') : '');
  const build = stages.find((s) => s.name === 'build');
  const runtime = stages.at(-1);
  if (!build || build === runtime) throw new Error('Dockerfile: expected a `build` stage followed by the runtime stage');
  const buildDir = join(out, 'build');
  const appDir = join(out, 'app');
  mkdirSync(buildDir, { recursive: true });
  mkdirSync(appDir, { recursive: true });

  let buildVars = {};
  for (const { kind, args } of build.instructions) {
    const started = Date.now();
    if (kind === 'WORKDIR' || kind === 'ARG' || kind === 'LABEL') continue;
    if (kind === 'ENV') buildVars = { ...buildVars, ...envArgs(args) };
    else if (kind === 'COPY') {
      const { flags, sources, dest } = copyArgs(args);
      if (flags.from) throw new Error(`build stage: COPY --from is not supported here: ${args}`);
      copyFromContext(context, ignored, sources, dest, buildDir);
    } else if (kind === 'RUN') run(args, buildDir, stageEnv(buildVars));
    else throw new Error(`build stage: ${kind} is not supported here`);
    emit({ step: 'build', kind, args, ms: Date.now() - started });
  }

  let runtimeVars = {};
  let entrypoint = [];
  let cmd = [];
  for (const { kind, args } of runtime.instructions) {
    if (kind === 'ENV') runtimeVars = { ...runtimeVars, ...envArgs(args) };
    else if (kind === 'ENTRYPOINT') entrypoint = execForm(args);
    else if (kind === 'CMD') cmd = execForm(args);
    else if (kind === 'COPY') {
      const { flags, sources, dest } = copyArgs(args);
      if (flags.from !== build.name) throw new Error(`runtime stage: only COPY --from=${build.name} is supported here: ${args}`);
      const workdir = build.instructions.find((i) => i.kind === 'WORKDIR')?.args ?? '/';
      for (const src of sources) {
        const rel = posix.relative(workdir, src);
        if (rel.startsWith('..')) throw new Error(`runtime stage: ${src} is outside the build stage's WORKDIR`);
        const target = dest.endsWith('/') || sources.length > 1 ? join(appDir, dest, posix.basename(rel)) : join(appDir, dest);
        mkdirSync(dirname(target), { recursive: true });
        renameSync(join(buildDir, rel), target);
      }
      emit({ step: 'runtime', kind, args });
      continue;
    } else if (kind === 'RUN') {
      emit({ step: 'runtime', kind, args, skipped: 'needs the image (absolute paths, the `node` user)' });
      continue;
    }
  }
  const result = { appDir, env: runtimeVars, command: [...entrypoint, ...cmd] };
  emit({ result });
  return result;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const arg = (name) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const context = resolve(arg('--context') ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
  const out = resolve(arg('--out') ?? mkdtempSync(join(tmpdir(), 'switchboard-docker-steps-')));
  try {
    dockerSteps({ context, out });
  } catch (err) {
    process.stderr.write(`docker-steps: ${err.message}\n`);
    process.exit(1);
  }
}
