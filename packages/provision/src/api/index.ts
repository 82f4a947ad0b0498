import type { ImageVerifier } from '@better-compute/pki';
import type { Engine } from '../engine/start-workflow';
import { imagesApi } from './images';
import { profilesApi } from './profiles';
import { workflowsApi } from './workflows';

export { type ApiImage, type ApiImageSummary, type ImagesApi, imagesApi } from './images';
export { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, type Page } from './pages';
export {
  type ApiProfile,
  type ApiProfileSummary,
  type ProfileIssue,
  type ProfileRendering,
  type ProfileValidation,
  profilesApi,
  type RenderedStep,
} from './profiles';
export {
  type ApiWorkflow,
  type ApiWorkflowStep,
  type ApiWorkflowSummary,
  toApiWorkflow,
  workflowsApi,
} from './workflows';

/**
 * The provision module's API groups, `images`, `profiles` and `workflows`, resolving against an engine's steps and
 * shipped profiles; `images.register` checks signatures with `imageVerifier` (pki's allowlist by default).
 * `provisionModule()` mounts them as its `api`.
 *
 * @example
 * ```ts
 * const provision = provisionModule({ steps, profiles });
 * provision.api.workflows.get; // the same groups: provisionApi(provision.engine)
 * ```
 */
export function provisionApi(engine: Engine, imageVerifier?: ImageVerifier) {
  return { images: imagesApi(imageVerifier), profiles: profilesApi(engine), workflows: workflowsApi() };
}

/**
 * The groups {@link provisionApi} returns; `compute.api` is typed loosely, so tests and clients cast it to
 * `ApiClient<ProvisionApi>` for typed calls.
 *
 * @example
 * ```ts
 * const api = compute.api as unknown as ApiClient<ProvisionApi>;
 * const wf = await api.workflows.get(token, { tenantId: 'root', nodeId, workflowId });
 * ```
 */
export type ProvisionApi = ReturnType<typeof provisionApi>;
