// How long the simulated site agent and machines of bench/metal take to answer a command, and how long a machine
// takes to come back after a boot. Two models: `fixed` (every command answered 0.5–1.5 × one mean: a closed loop that
// saturates the engine, for machines per minute) and `realistic` (each command as long as it takes on real GPU servers,
// scaled by a factor, and boots that take their own time after the power command returned).

import type { Json } from '@better-compute/core';

/** The think-time model of a run. */
export type ThinkModel = { kind: 'fixed'; meanMs: number } | { kind: 'realistic'; scale: number };

/**
 * Mean seconds per command on real hardware, by command kind or `driver.invoke <operation>`. A BMC answers a power or
 * boot-device call in seconds (the boot that follows is apart: {@link BOOT_SECONDS}); the ramdisk's inventory, burn-in
 * diagnostics, an image write and a wipe take minutes.
 */
const REAL_SECONDS: Record<string, number> = {
  'driver.invoke power.getPower': 1,
  'driver.invoke power.setPower': 4,
  'driver.invoke management.setBootDevice': 2,
  'driver.invoke firmware.getInventory': 8,
  'driver.invoke bios.getSettings': 8,
  'driver.invoke virtual-media.insert': 3,
  'driver.invoke virtual-media.eject': 3,
  'site.bootEntry': 0.2,
  'site.httpProxy': 0.5,
  'inspect.collect': 20,
  'deploy.image': 240,
  'boot.kexec': 3,
  'node.reboot': 3,
  'disk.wipe': 60,
  'health.resetGpus': 20,
};
/** DCGM's run levels: r1 about a minute, r2 a few minutes, r3 half an hour, r4 well over an hour. */
const DCGM_SECONDS: Record<number, number> = { 1: 60, 2: 180, 3: 1_800, 4: 4_800 };
const DEFAULT_SECONDS = 2;

/**
 * Seconds from a boot's start to its agent connecting: a GPU server's firmware (POST, PXE) takes minutes; a kexec
 * skips the firmware.
 */
export const BOOT_SECONDS = { firmware: 150, kexec: 40 } as const;

/** What a command is, for its think time: its kind, or `driver.invoke <operation>`. */
export function commandLabel(kind: string, payload: Json): string {
  if (kind !== 'driver.invoke') return kind;
  const operation = (payload as { operation?: unknown } | null)?.operation;
  return `${kind} ${String(operation)}`;
}

const jitter = () => 0.5 + Math.random();

/**
 * How long after it was picked up a command is answered (ms, jittered 0.5–1.5 × the mean).
 *
 * @example
 * ```ts
 * thinkMs({ kind: 'realistic', scale: 1 }, 'inspect.collect', {}); // about 20,000
 * ```
 */
export function thinkMs(model: ThinkModel, kind: string, payload: Json): number {
  if (model.kind === 'fixed') return model.meanMs * jitter();
  const label = commandLabel(kind, payload);
  let seconds = REAL_SECONDS[label] ?? DEFAULT_SECONDS;
  if (kind === 'diag.dcgm') {
    const level = Number((payload as { level?: unknown } | null)?.level ?? 1);
    seconds = DCGM_SECONDS[level] ?? DCGM_SECONDS[1] ?? DEFAULT_SECONDS;
  }
  return seconds * 1000 * model.scale * jitter();
}

/**
 * How long a machine's agent takes to connect after a boot of that sort (ms, jittered): 0 in the fixed model, whose
 * think time already stands for the whole command.
 *
 * @example
 * ```ts
 * bootMs({ kind: 'realistic', scale: 0.1 }, 'firmware'); // about 15,000
 * ```
 */
export function bootMs(model: ThinkModel, boot: keyof typeof BOOT_SECONDS): number {
  if (model.kind === 'fixed') return 0;
  return BOOT_SECONDS[boot] * 1000 * model.scale * jitter();
}

/**
 * The model the environment asks for: `BENCH_THINK_MS` set gives the fixed model with that mean; otherwise the
 * realistic one scaled by `BENCH_TIME_SCALE` (default 1).
 *
 * @example
 * ```ts
 * const model = thinkModelFromEnv(process.env);
 * ```
 */
export function thinkModelFromEnv(env: NodeJS.ProcessEnv): ThinkModel {
  if (env.BENCH_THINK_MS !== undefined && env.BENCH_THINK_MS !== '') {
    return { kind: 'fixed', meanMs: Number(env.BENCH_THINK_MS) };
  }
  const scale = Number(env.BENCH_TIME_SCALE ?? 1);
  if (!Number.isFinite(scale) || scale <= 0) throw new Error('BENCH_TIME_SCALE must be a positive number');
  return { kind: 'realistic', scale };
}

/** A one-line description of the model for the bench's header. */
export function describeThinkModel(model: ThinkModel): string {
  if (model.kind === 'fixed') return `agents' think time 0.5–1.5 × ${model.meanMs} ms per command`;
  return (
    `realistic think times × ${model.scale} (BMC calls 1–8 s, inventory 20 s, DCGM r2 180 s and r4 80 min, image ` +
    `240 s, wipe 60 s; boots ${BOOT_SECONDS.firmware} s through firmware, ${BOOT_SECONDS.kexec} s by kexec; each 0.5–1.5 ×)`
  );
}
