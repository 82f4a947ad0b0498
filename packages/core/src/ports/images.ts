import type { Clock } from '../clock';
import type { Logger } from '../kernel/logger';
import type { SqlExecutor } from '../sql/executor';

/** What an {@link ImageSource} gets when it resolves a reference: who asks, and the ports to ask with. */
export interface ImageSourceContext {
  /** The tenant the image is resolved for (the machine owner's). */
  tenantId: string;
  sql: SqlExecutor;
  clock: Clock;
  log: Logger;
  /** Aborted when the caller gives up (a step's deadline, a worker stopping). */
  signal?: AbortSignal;
}

/** Where an {@link ImageSource} says an image is: a URL a site cache or agent can fetch, and its `sha256:<hex>` digest. */
export interface ResolvedImageSource {
  url: string;
  digest: string;
}

/**
 * A resolver for image URLs of another scheme than `http(s)` (for example `oci://registry/repo:tag` or `s3://bucket/key`):
 * it turns a reference of its `scheme` into a fetchable URL and the digest to check it against.
 *
 * Declared only: nothing in better-compute uses it yet. The image catalog stores `url` as given and steps fetch
 * `http(s)` URLs; a later release will let `provisionModule` take image sources and resolve catalog URLs through them.
 *
 * @example
 * ```ts
 * const oci: ImageSource = {
 *   scheme: 'oci',
 *   async resolve(ref, ctx) {
 *     const manifest = await registry.head(ref, { signal: ctx.signal });
 *     return { url: manifest.blobUrl, digest: manifest.digest };
 *   },
 * };
 * ```
 */
export interface ImageSource {
  /** The URL scheme it resolves, without `:` (`oci`, `s3`, …). */
  readonly scheme: string;
  resolve(ref: string, ctx: ImageSourceContext): Promise<ResolvedImageSource>;
}
