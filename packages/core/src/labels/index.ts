export {
  isLabelKey,
  LABEL_KEY_PATTERN,
  type LabelErrorCode,
  type Labels,
  labelValueProblem,
  MAX_LABEL_VALUE_LENGTH,
  MAX_LABELS,
  validateLabels,
} from './labels';
export { checkWhen, evaluateWhen, MAX_WHEN_LENGTH, parseWhen, type WhenExpression, type WhenTerm } from './when';
