export {
  BCD_INSTALL_SCRIPT,
  BCD_PATHS,
  BCD_SYSTEMD_UNIT,
  BUILTIN_USER_DATA_TEMPLATES,
  cloudInitTemplate,
  IGNITION_VERSION,
  ignitionTemplate,
} from './builtin-templates';
export {
  type CheckedUserDataOptions,
  checkUserDataOptions,
  type ProfileUserData,
  resolveUserDataTemplate,
  type UserDataOptions,
} from './options';
export {
  checkUserDataValues,
  renderTemplate,
  USER_DATA_VARIABLES,
  type UserDataTemplate,
  type UserDataValues,
  type UserDataVariableName,
  type UserDataVariables,
} from './render-template';
export {
  type RenderedUserData,
  renderedUserData,
  toRenderedUserData,
  USERDATA_RENDER_STEP_ID,
} from './rendered-user-data';
