// The methods each route path takes, for answering a known path asked with another method: 405 with `Allow`
// (RFC 9110, 15.5.6), not the 404 of a path that does not exist (a 'Noticed' item, 2026-11-28).
import type { FastifyContextConfig, FastifyInstance, RouteOptions } from 'fastify';

/** a route's error shape (declared on fastify's route config by ./errors.ts, which uses this module) */
type ErrorShape = FastifyContextConfig['errorShape'];

interface KnownPath {
  pattern: RegExp;
  methods: Set<string>;
  errorShape?: ErrorShape;
}

/** `/api/v1/webhook-endpoints/:id/` as a pattern of concrete paths (a parameter is one segment, `*` the rest). */
const patternOf = (url: string): RegExp =>
  new RegExp(`^${url.split(/(:[A-Za-z0-9_]+|\*)/).map((part) =>
    part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('')}$`);

/** The methods a route takes (fastify's route options give one or a list). */
export const methodsOf = (route: RouteOptions): string[] => (Array.isArray(route.method) ? route.method : [route.method]);

/**
 * The paths a route answers: a plugin's `/` under a prefix answers the prefix with and without its trailing slash
 * (fastify's `prefixTrailingSlash: 'both'`), but the hook sees only the first (`/docs`, found in review 17: `POST
 * /docs/` answered `Allow: HEAD`).
 */
function urlsOf(route: RouteOptions & { routePath?: string; prefix?: string }): string[] {
  const both = route.routePath === '' && route.prefix && (route.prefixTrailingSlash ?? 'both') === 'both' && !route.url.endsWith('/');
  return both ? [route.url, `${route.url}/`] : [route.url];
}

/** Collects the routes as they are registered; `allowedFor(path)` answers the methods of the path, if it is one. */
export function collectRouteMethods(app: FastifyInstance): { allowedFor(path: string): { methods: string[]; errorShape?: ErrorShape } | undefined } {
  const paths = new Map<string, KnownPath>();
  app.addHook('onRoute', (route) => {
    for (const url of urlsOf(route)) {
      const known = paths.get(url) ?? { pattern: patternOf(url), methods: new Set<string>(), errorShape: route.config?.errorShape };
      for (const method of methodsOf(route)) known.methods.add(method);
      paths.set(url, known);
    }
  });
  return {
    allowedFor(path) {
      const methods = new Set<string>();
      let errorShape: ErrorShape | undefined;
      for (const known of paths.values()) {
        if (!known.pattern.test(path)) continue;
        for (const m of known.methods) methods.add(m);
        errorShape ??= known.errorShape;
      }
      return methods.size === 0 ? undefined : { methods: [...methods].sort(), errorShape };
    },
  };
}
