// A bounded least-recently-used map: the delivery consumer's caches of send streams and of provider message owners,
// the API keys' hashes (src/http/api-key-hashes.ts).
/** A bounded map that forgets the least recently used entries. */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly max: number) {}
  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
  delete(key: K): void {
    this.map.delete(key);
  }
}
