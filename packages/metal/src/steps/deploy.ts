import { ComputeError, field, manifest } from '@better-compute/core';
import { type ImageVerifier, imageVerifier as pkiImageVerifier } from '@better-compute/pki';
import {
  awaitCommand,
  defineStep,
  IMAGE_REF_PATTERN,
  renderedUserData,
  resolveImageRef,
  type StepContext,
} from '@better-compute/provision';
import { machineForStep, relayed } from './relay';

/** What `deploy.deploy` is built with. */
export interface DeployStepOptions {
  /** Checks the image's stored signature again when it is resolved (a revoked signer no longer deploys). */
  imageVerifier?: ImageVerifier;
}

interface DeployRequestRow {
  image: unknown;
  deploy_request: { image?: unknown } | null;
}

/** The image reference to deploy: the step's `image`, else the pinned profile's, else the one the deploy asked for. */
async function imageRef(ctx: StepContext, given: string | undefined, nodeId: string): Promise<string> {
  if (given !== undefined) return given;
  const { rows } = await ctx.sql.query<DeployRequestRow>(
    `SELECT (SELECT w.document->>'image' FROM workflows w WHERE w.id = $2) AS image, m.deploy_request
     FROM metal_machines m WHERE m.node_id = $1`,
    [nodeId, ctx.workflowId],
  );
  const row = rows[0];
  const ref = row?.image ?? row?.deploy_request?.image;
  if (typeof ref !== 'string') {
    throw new ComputeError(
      'INVALID_CONFIG',
      'deploy.deploy: no image to deploy (the step, the profile and the deploy name none)',
      {
        details: { path: ['with', 'image'] },
      },
    );
  }
  return ref;
}

/**
 * Makes the `deploy.deploy` step: resolves the image (`with.image`, else the pinned profile's `image`, else the one
 * the deploy request named) with `resolveImageRef` in the machine owner's tenant, checking its signature again with
 * `imageVerifier` (default pki's, which needs `ctx.pki`: INVALID_CONFIG without it), finds the user data `userdata.render` stored earlier in the workflow (`renderedUserData`; none is
 * fine), and sends one `deploy.image { image: { url, digest }, userDataRef?, userDataKind? }` to the machine's ramdisk
 * (key `:image`), which writes the image to the root disk and the user data beside it. Only the user data's reference
 * travels. An image without a URL is INVALID_STATE. Returns `{ commandId, result, image: { ref, digest } }`.
 *
 * @example
 * ```ts
 * const steps = [{ use: 'userdata.render' }, { use: 'deploy.deploy', on: 'ramdisk' }];
 * ```
 */
export function deployStep(options: DeployStepOptions = {}) {
  return defineStep({
    id: 'deploy.deploy',
    runsOn: 'control-plane',
    relays: ['ramdisk'],
    sends: ['deploy.image'],
    timeout: '1h',
    retrySafe: true,
    input: manifest({
      image: field
        .string({ minLength: 3, maxLength: 256, pattern: IMAGE_REF_PATTERN.source })
        .optional()
        .describe('name@version in the catalog; default the profile image or the deploy request.'),
    }),
    description: "Writes the catalog image and the rendered user data to the machine's disk from the ramdisk.",
    async run(input, ctx) {
      const machine = await machineForStep(ctx, 'deploy.deploy');
      const ref = await imageRef(ctx, input.image, machine.nodeId);
      // Without a verifier of its own it checks with pki's, and only where pki is installed (its port wired).
      const verifier = options.imageVerifier ?? (ctx.pki ? pkiImageVerifier : undefined);
      if (!verifier) {
        throw new ComputeError('INVALID_CONFIG', 'deploy.deploy verifies the image: pass pki to betterCompute', {
          details: { path: ['pki'] },
        });
      }
      const image = await resolveImageRef(ctx.sql, machine.tenantId, ref, { verifier });
      if (!image.url) {
        throw new ComputeError('INVALID_STATE', `deploy.deploy: image ${ref} has no url to fetch it from`, {
          details: { path: ['with', 'image'], reason: 'image-without-url' },
        });
      }
      const userData = await renderedUserData(ctx.sql, ctx.workflowId);
      const sent = await awaitCommand(ctx, {
        nodeId: machine.nodeId,
        kind: 'deploy.image',
        key: 'image',
        payload: {
          image: { url: image.url, digest: image.digest },
          ...(userData ? { userDataRef: userData.userDataRef, userDataKind: userData.kind } : {}),
        },
      });
      return { ...relayed(sent, 'deploy.deploy'), image: { ref: image.ref, digest: image.digest } };
    },
  });
}
