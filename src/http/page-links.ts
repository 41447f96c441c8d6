import type { FastifyRequest } from 'fastify';

/** Absolute next/previous links that keep every other query parameter (page 1 has no `page`). */
export function pageLinks(request: FastifyRequest, pageNumber: number, pageSize: number, count: number): { next: string | null; previous: string | null } {
  const link = (p: number) => linkWith(request, { page: pageParam(p) });
  return {
    next: pageNumber * pageSize < count ? link(pageNumber + 1) : null,
    previous: pageNumber > 1 ? link(pageNumber - 1) : null,
  };
}

/** The `page` query parameter of page `p`: none for the first page. */
export const pageParam = (p: number): string | null => (p === 1 ? null : String(p));

/** The request's absolute URL with some query parameters set or (null) removed, the others kept. */
export function linkWith(request: FastifyRequest, changes: Record<string, string | null>): string {
  const [path, qs = ''] = request.url.split('?');
  const params = new URLSearchParams(qs);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null) params.delete(name);
    else params.set(name, value);
  }
  const s = params.toString();
  return `${request.protocol}://${hostOf(request)}${path}${s ? `?${s}` : ''}`;
}

/**
 * The host the links name: the request's (its Host, or its absolute-form target's), else, when it has none (HTTP/1.0
 * without Host, or `Host:` empty), the address and port the client connected to: the links were `http:///api/...`
 * (review 22).
 */
function hostOf(request: FastifyRequest): string {
  if (request.host !== '') return request.host;
  const { localAddress, localPort } = request.socket;
  if (!localAddress) return 'localhost';
  const address = localAddress.includes(':') ? `[${localAddress}]` : localAddress;
  return localPort ? `${address}:${localPort}` : address;
}
