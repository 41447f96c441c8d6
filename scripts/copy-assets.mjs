// tsc compiles TypeScript only; the versioned SQL migrations ship beside the compiled migrator.
import { cpSync } from 'node:fs';
cpSync('src/adapters/postgres/migrations', 'dist/adapters/postgres/migrations', { recursive: true });
