import { sql } from 'drizzle-orm';
import { boolean, index, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/**
 * Metal's record of a machine: a `nodes` row of kind `machine` (core owns that row and its `provision_state`, the
 * lifecycle state) plus what metal needs to drive it. One row per enrolled or adopted machine.
 */
export const metalMachines = pgTable(
  'metal_machines',
  {
    nodeId: text('node_id').primaryKey(),
    tenantId: text('tenant_id').notNull(),
    siteId: text('site_id').notNull(),
    pool: text('pool'),
    // The phase under way (a workflow-driven state), or the phase a `failed` machine failed in (what recover reruns).
    phase: text('phase'),
    // The phase under way is a step of an enroll, which goes on through inspecting and commissioning by itself.
    enrolling: boolean('enrolling').notNull().default(false),
    // An enroll that asked to stop after `enrolling` or `inspecting`; the machine rests there until inspect/commission.
    holdAfter: text('hold_after'),
    // The machine rests in `enrolling` or `inspecting` as its enroll asked (holdAfter), with no workflow, until an
    // operator's inspect or commission continues it.
    held: boolean('held').notNull().default(false),
    // The workflow of metal's that runs now (null when none does).
    workflowId: text('workflow_id'),
    // The error of the workflow (or abort) that failed the machine: { code, message, stepId?, workflowId }.
    lastError: jsonb('last_error'),
    // What the deploy asked for: { profileId, profileVersion?, image?, userData? }.
    deployRequest: jsonb('deploy_request'),
    bmcAddress: text('bmc_address').notNull(),
    bmcDriver: text('bmc_driver').notNull(),
    // A SecretRef (through ctx.secrets) to the BMC's { username, password }; never the credential itself.
    bmcCredentialRef: jsonb('bmc_credential_ref'),
    // The addresses the control plane knows for the machine (inventory, leases): the only ones httpViaSite may reach.
    addresses: text('addresses').array().notNull().default(sql`'{}'::text[]`),
    // When the machine was retired (null until then): a retired machine frees its BMC address and MACs, so the same
    // hardware may be enrolled again as a new machine; its row stays as the record of what it was.
    retiredAt: tstz('retired_at'),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
  },
  (t) => [
    index('metal_machines_tenant_idx').on(t.tenantId, t.createdAt),
    index('metal_machines_site_idx').on(t.siteId),
    // A BMC address belongs to one machine of its site that is not retired.
    uniqueIndex('metal_machines_bmc_uq').on(t.siteId, t.bmcAddress).where(sql`retired_at IS NULL`),
  ],
);

/** A machine's MACs; a MAC belongs to one machine in the whole fleet (it is what PXE and DHCP answer by). */
export const metalMacs = pgTable(
  'metal_macs',
  {
    mac: text('mac').primaryKey(),
    nodeId: text('node_id').notNull(),
  },
  (t) => [index('metal_macs_node_idx').on(t.nodeId)],
);
