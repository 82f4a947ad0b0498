import { type Command, ComputeError, field, type Json, manifest } from '@better-compute/core';
import { type ImageVerifier, imageVerifier as pkiImageVerifier } from '@better-compute/pki';
import {
  type AwaitedCommand,
  awaitCommand,
  defineStep,
  IMAGE_REF_PATTERN,
  renderedUserData,
  resolveImageRef,
  type StepContext,
  stepCommandKey,
} from '@better-compute/provision';
import { preloadedMachine } from './machine-preload';
import { machineForStep, RELAYED_COMMAND_POLL_MS, relayed } from './relay';

/** What `deploy.deploy` is built with. */
export interface DeployStepOptions {
  /** Checks the image's stored signature again when it is resolved (a revoked signer no longer deploys). */
  imageVerifier?: ImageVerifier;
}

/** What the workflow's deploy asked for, and what its pinned profile says. */
interface DeployInputs {
  /** The deploy request's image (`metal.deploy { image }`), only in a workflow metal owns. */
  requestImage: string | undefined;
  /** The deploy request's own user data (`metal.deploy { userData }`, stored through ctx.secrets), likewise. */
  requestUserDataRef: string | undefined;
  profileImage: string | undefined;
  /** The pinned profile's `userData.kind`, sent with the deploy's own user data. */
  userDataKind: string | undefined;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

type DeployRequestFields = { image?: unknown; userDataRef?: unknown };

/**
 * The workflow's pinned profile (its `image`, its `userData.kind`, from the step's context) and, when metal started
 * the workflow (`owner: 'metal'`: a deploy, or its recover), the machine's deploy request: as the claim read it with
 * the machine, else read. A workflow someone else started on the machine never picks up a deploy request's image or
 * user data.
 */
async function deployInputs(ctx: StepContext, nodeId: string): Promise<DeployInputs> {
  const profile = ctx.workflow.profile as { image?: unknown; userData?: { kind?: unknown } };
  let request: DeployRequestFields | undefined;
  if (ctx.workflow.owner === 'metal') {
    const preloaded = preloadedMachine(ctx, nodeId)?.lifecycle;
    const stored = preloaded
      ? preloaded.deployRequest
      : (
          await ctx.sql.query<{ deploy_request: unknown }>(
            'SELECT deploy_request FROM metal_machines WHERE node_id = $1',
            [nodeId],
          )
        ).rows[0]?.deploy_request;
    if (stored && typeof stored === 'object' && !Array.isArray(stored)) request = stored as DeployRequestFields;
  }
  return {
    requestImage: text(request?.image),
    requestUserDataRef: text(request?.userDataRef),
    profileImage: text(profile.image),
    userDataKind: text(profile.userData?.kind),
  };
}

/** The image reference to deploy: the deploy request's, else the step's `image`, else the pinned profile's. */
function imageRef(inputs: DeployInputs, given: string | undefined): string {
  const ref = inputs.requestImage ?? given ?? inputs.profileImage;
  if (ref === undefined) {
    throw new ComputeError(
      'INVALID_CONFIG',
      'deploy.deploy: no image to deploy (the deploy, the step and the profile name none)',
      { details: { path: ['with', 'image'] } },
    );
  }
  return ref;
}

/**
 * The user data `deploy.image` carries, by reference only: the deploy request's own (`metal.deploy { userData }`),
 * else the document `userdata.render` stored earlier in the workflow, else none.
 */
async function userDataOf(
  ctx: StepContext,
  inputs: DeployInputs,
): Promise<{ ref: string; kind?: string; from: 'deploy' | 'userdata.render' } | undefined> {
  if (inputs.requestUserDataRef !== undefined) {
    return {
      ref: inputs.requestUserDataRef,
      ...(inputs.userDataKind === undefined ? {} : { kind: inputs.userDataKind }),
      from: 'deploy',
    };
  }
  const rendered = await renderedUserData(ctx.sql, ctx.workflowId);
  return rendered ? { ref: rendered.userDataRef, kind: rendered.kind, from: 'userdata.render' } : undefined;
}

const DEPLOY_COMMAND = { kind: 'deploy.image', key: 'image', pollMs: RELAYED_COMMAND_POLL_MS } as const;

/** The `deploy.image` this attempt already sent, as the claim read it for this run; undefined when it read none. */
function sentEarlier(ctx: StepContext, nodeId: string): Command | undefined {
  const key = stepCommandKey(ctx, DEPLOY_COMMAND.key);
  return ctx.preloads?.commands?.find((c) => c.nodeId === nodeId && c.key === key && c.kind === DEPLOY_COMMAND.kind);
}

/** The step's result: the command and its answer, the image deployed, and where its user data came from. */
function deployResult(sent: AwaitedCommand, ref: string, payload: Json, inputs: DeployInputs) {
  const carried = payload as { image?: { digest?: unknown }; userDataRef?: unknown };
  const userDataRef = text(carried.userDataRef);
  const userData =
    userDataRef === undefined ? null : userDataRef === inputs.requestUserDataRef ? 'deploy' : 'userdata.render';
  return {
    ...relayed(sent, 'deploy.deploy'),
    image: { ref, digest: text(carried.image?.digest) ?? null },
    userData,
  };
}

/**
 * Makes the `deploy.deploy` step: resolves the image (the deploy request's `image` when metal's deploy named one, else
 * `with.image`, else the pinned profile's `image`: an operator gets what they asked for) with `resolveImageRef` in the
 * machine owner's tenant, checking its signature again with `imageVerifier` (default pki's, which needs `ctx.pki`:
 * INVALID_CONFIG without it), and sends one `deploy.image { image: { url, digest }, userDataRef?, userDataKind? }` to
 * the machine's ramdisk (key `:image`), which writes the image to the root disk and the user data beside it. The user
 * data is the deploy request's own (`metal.deploy { userData }`, with the profile's `userData.kind`), else the document
 * `userdata.render` stored earlier in the workflow (`renderedUserData`), else none; only its reference travels, and
 * neither the document nor its reference is in the step's result. A deploy request counts only in a workflow metal
 * started (`owner: 'metal'`). An image without a URL is INVALID_STATE. Returns
 * `{ commandId, result, image: { ref, digest }, userData: 'deploy' | 'userdata.render' | null }`.
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
        .describe("name@version in the catalog; the deploy request's image wins, the profile's is the default."),
    }),
    description:
      "Writes the catalog image and the deploy's or the rendered user data to the machine's disk from the ramdisk.",
    async run(input, ctx) {
      const machine = await machineForStep(ctx, 'deploy.deploy');
      const inputs = await deployInputs(ctx, machine.nodeId);
      const ref = imageRef(inputs, input.image);
      const earlier = sentEarlier(ctx, machine.nodeId);
      if (earlier) {
        // Run again for the command an earlier run of this attempt sent: what it carries is what was resolved and
        // verified then, so nothing is resolved again (the image is written, or being written, already).
        const sent = await awaitCommand(ctx, {
          ...DEPLOY_COMMAND,
          nodeId: machine.nodeId,
          payload: earlier.payload,
          found: earlier,
        });
        return deployResult(sent, ref, earlier.payload, inputs);
      }
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
      const userData = await userDataOf(ctx, inputs);
      const payload = {
        image: { url: image.url, digest: image.digest },
        ...(userData ? { userDataRef: userData.ref } : {}),
        ...(userData?.kind === undefined ? {} : { userDataKind: userData.kind }),
      };
      const sent = await awaitCommand(ctx, { ...DEPLOY_COMMAND, nodeId: machine.nodeId, payload });
      return deployResult(sent, image.ref, payload, inputs);
    },
  });
}
