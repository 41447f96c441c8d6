// tsc compiles TypeScript only; the versioned SQL migrations ship beside the compiled migrator. The folder is
// replaced, not merged: a migration renamed or removed in src must not linger in dist as a second version.
import { cpSync, rmSync } from 'node:fs';
rmSync('dist/adapters/postgres/migrations', { recursive: true, force: true });
cpSync('src/adapters/postgres/migrations', 'dist/adapters/postgres/migrations', { recursive: true });
