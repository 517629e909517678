/**
 * The one place that reads (and writes) the `mcphost.*` settings in VS Code: a thin binding of settings.ts (pure,
 * unit-tested) to the workspace configuration and the file system.
 */

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as vscode from 'vscode';

import {
  type ExtensionSettings,
  type Resolution,
  SETTINGS,
  type SettingTarget,
  SETTINGS_SECTION,
  resolveCommand,
  settingName,
  settingsFrom,
  writeTarget,
} from './settings';

export function readSettings(scope?: vscode.ConfigurationScope): ExtensionSettings {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION, scope);
  return settingsFrom((key, defaultValue) => config.get(key, defaultValue));
}

const TARGETS: { readonly [T in SettingTarget]: vscode.ConfigurationTarget } = {
  user: vscode.ConfigurationTarget.Global,
  workspace: vscode.ConfigurationTarget.Workspace,
};

/** Writes one `mcphost.*` setting where its value in force comes from, else to the user's settings.json. VS Code
 * edits that one key and leaves every other entry of the file as it is. Returns where it was written. */
export async function updateSetting<K extends keyof ExtensionSettings>(
  field: K,
  value: ExtensionSettings[K],
): Promise<SettingTarget> {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION);
  const key = SETTINGS[field].key;
  const target = writeTarget(config.inspect(key));
  await config.update(key, value, TARGETS[target]);
  return target;
}

/** Whether the change touches any of these settings. */
export function settingsChanged(
  event: vscode.ConfigurationChangeEvent,
  fields: readonly (keyof ExtensionSettings)[],
): boolean {
  return fields.some((field) => event.affectsConfiguration(settingName(field)));
}

function isExecutable(file: string): boolean {
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) {
      return false;
    }
    if (process.platform !== 'win32') {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

/** The mcphost command for the current settings and workspace. */
export function resolveMcphost(): Resolution {
  return resolveCommand({
    settings: readSettings(),
    workspaceFolders: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
    env: process.env,
    platform: process.platform,
    home: os.homedir(),
    exists: isExecutable,
  });
}
