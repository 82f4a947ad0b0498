export {
  bumpNodeGeneration,
  createNode,
  type GetNodeOptions,
  getNode,
  type NewNode,
  type NodeRow,
  setNodeFacts,
  setNodeHostSection,
  setNodeLabels,
  setNodeObservedGeneration,
  setNodeProvisionState,
} from './node-repository';
export { joinNodeSql, nodeColumnSql, nodeHasLabelsSql } from './node-sql';
