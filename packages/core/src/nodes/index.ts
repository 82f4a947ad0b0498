export {
  bumpNodeGeneration,
  createNode,
  type GetNodeOptions,
  getNode,
  type NewNode,
  type NodeRow,
  setNodeHostSection,
  setNodeLabels,
  setNodeObservedGeneration,
  setNodeProvisionState,
} from './node-repository';
