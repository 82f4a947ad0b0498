import type { Profile } from '@better-compute/provision';
import { metalDeployImage, metalDeployTalos } from './deploy-profiles';
import {
  metalAdopt,
  metalCommission,
  metalEnroll,
  metalInspect,
  metalRelease,
  metalRetire,
} from './lifecycle-profiles';

export { metalDeployImage, metalDeployTalos } from './deploy-profiles';
export {
  metalAdopt,
  metalCommission,
  metalEnroll,
  metalInspect,
  metalRelease,
  metalRetire,
} from './lifecycle-profiles';

/**
 * The profiles metal ships (read-only, listed under the tenant `builtin`): one per phase (`metal.enroll`,
 * `metal.inspect`, `metal.commission`, `metal.release`, `metal.retire`, `metal.adopt`) and two deploys
 * (`metal.deploy-image`, `metal.deploy-talos`).
 *
 * @example
 * ```ts
 * metalProfiles.map((p) => p.id); // ['metal.enroll', 'metal.inspect', …]
 * ```
 */
export const metalProfiles: readonly Profile[] = Object.freeze([
  metalEnroll,
  metalInspect,
  metalCommission,
  metalRelease,
  metalRetire,
  metalAdopt,
  metalDeployImage,
  metalDeployTalos,
]);
