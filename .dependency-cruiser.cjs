// The layering of ARCHITECTURE section 2 and docs/conventions.md, checked by test/unit/layering.test.ts
// (`npx depcruise src` prints the same). Inner layers (events, ports, shared, commands, projections) never import
// outer ones (workers, http, adapters, cli); projections read the event catalogue, never the write side; no circles.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'inner-imports-outer',
      comment: 'events, ports, shared, commands and projections must not depend on workers, http, adapters or cli',
      severity: 'error',
      from: { path: '^src/(events|ports|shared|commands|projections)/' },
      to: { path: '^src/(workers|http|adapters|cli)/' },
    },
    {
      name: 'projection-imports-command',
      comment: 'a projection depends on src/events (the published catalogue), not on the write side',
      severity: 'error',
      from: { path: '^src/projections/' },
      to: { path: '^src/commands/' },
    },
    {
      name: 'no-circular',
      comment: 'no import circle anywhere in src',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
