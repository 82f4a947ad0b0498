// The machine lifecycle as decisions: what a request or a workflow's end does to a node. The module that carries the
// moves out (metal(), its reconciler, steps, profiles and API group) builds on these.

export { checkMachineUrl, type MachineAddresses, type MachineUrl } from './http-via-site/machine-url';
export { checkInventory, type Inventory, inventoryLabels, inventorySchema } from './inventory/inventory';
export * from './lifecycle';
