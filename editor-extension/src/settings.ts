/**
 * Settings resolution, pure: every `mcphost.*` setting with its default, and from those settings, the workspace
 * folders and the environment to the command that runs mcphost. Settings are reached only through a getter and the
 * file system only through the `exists` callback, so tests run in plain Node; workspaceSettings.ts binds both to
 * VS Code.
 *
 * Order: `mcphost.path` (an executable), `mcphost.interpreter` (a Python with mcphost installed, run as
 * `python -m mcphost`), the workspace's virtual environment (`.venv`, `venv`, `env`), then `mcphost` on PATH.
 */

import * as path from 'node:path';

import { INSTALL_HINT } from './identity';
import { type SinglePromptChoice, parseChoice } from './singlePrompt';

/** The settings that decide how the daemon and the CLI commands run. */
export interface McphostSettings {
  path: string;
  interpreter: string;
  configPath: string;
  env: Record<string, string>;
}

/** Every setting the extension reads. `mcphost.trace.server` is not here: vscode-languageclient reads it itself,
 * by the client's id. */
export interface ExtensionSettings extends McphostSettings {
  registerMcpServer: boolean;
  activityMaxRecords: number;
  /** The answer to the one-prompt-per-call offer (singlePrompt.ts). */
  singlePrompt: SinglePromptChoice;
}

export const SETTINGS_SECTION = 'mcphost';

/** Each setting's key in the `mcphost` section and its default; they must match package.json's
 * `contributes.configuration` (a unit test holds them to it). */
export const SETTINGS: { readonly [K in keyof ExtensionSettings]: { readonly key: string; readonly default: ExtensionSettings[K] } } = {
  path: { key: 'path', default: '' },
  interpreter: { key: 'interpreter', default: '' },
  configPath: { key: 'configPath', default: '' },
  env: { key: 'env', default: {} },
  registerMcpServer: { key: 'registerMcpServer', default: true },
  activityMaxRecords: { key: 'activity.maxRecords', default: 500 },
  singlePrompt: { key: 'singlePrompt', default: 'offer' },
};

/** Where a (window-scoped) setting is written: the workspace's settings when its value in force comes from there,
 * else the user's settings. */
export type SettingTarget = 'user' | 'workspace';

export function writeTarget(inspected: { workspaceValue?: unknown } | undefined): SettingTarget {
  return inspected?.workspaceValue !== undefined ? 'workspace' : 'user';
}

/** A change to any of these takes effect only when the daemon restarts. */
export const DAEMON_SETTINGS: readonly (keyof McphostSettings)[] = ['path', 'interpreter', 'configPath', 'env'];

/** Reads one setting of the `mcphost` section, as vscode's `WorkspaceConfiguration.get(key, default)` does. */
export type SettingGetter = <T>(key: string, defaultValue: T) => T;

/** The full name of a setting (`mcphost.activity.maxRecords`), for `affectsConfiguration` and messages. */
export function settingName(field: keyof ExtensionSettings): string {
  return `${SETTINGS_SECTION}.${SETTINGS[field].key}`;
}

export function settingsFrom(get: SettingGetter): ExtensionSettings {
  const read = <K extends keyof ExtensionSettings>(field: K): ExtensionSettings[K] =>
    get(SETTINGS[field].key, SETTINGS[field].default);
  return {
    path: read('path'),
    interpreter: read('interpreter'),
    configPath: read('configPath'),
    // A fresh default object, so that no caller can change the one in SETTINGS.
    env: get(SETTINGS.env.key, { ...SETTINGS.env.default }),
    registerMcpServer: read('registerMcpServer'),
    activityMaxRecords: read('activityMaxRecords'),
    // Anything but a known answer (a typo in settings.json) counts as not answered.
    singlePrompt: parseChoice(read('singlePrompt')),
  };
}

export interface ResolveContext {
  settings: McphostSettings;
  /** File system paths of the workspace folders, the first one first. */
  workspaceFolders: string[];
  env: Record<string, string | undefined>;
  platform: NodeJS.Platform;
  home: string;
  /** Whether an executable file exists at this absolute path. */
  exists: (file: string) => boolean;
}

export type CommandSource = 'mcphost.path' | 'mcphost.interpreter' | 'workspace venv' | 'PATH';

export interface McphostCommand {
  /** The executable to spawn. */
  command: string;
  /** Arguments before mcphost's own (`-m mcphost` for an interpreter). */
  prefix: string[];
  source: CommandSource;
  /** `--config` for every mcphost command, when the setting names a file. */
  configPath?: string;
  /** The daemon's environment on top of the editor's. */
  env: Record<string, string>;
}

export type Resolution = { ok: true; command: McphostCommand } | { ok: false; error: string };

export const VENV_DIRS = ['.venv', 'venv', 'env'];

/** `~`, `${workspaceFolder}`, `${userHome}` and `${env:NAME}` expanded; a relative path is taken from the first
 * workspace folder. Empty stays empty. */
export function expandPath(value: string, ctx: Pick<ResolveContext, 'workspaceFolders' | 'env' | 'home'>): string {
  let text = value.trim();
  if (!text) {
    return '';
  }
  const folder = ctx.workspaceFolders[0] ?? '';
  text = text
    .replace(/\$\{workspaceFolder\}/g, folder)
    .replace(/\$\{userHome\}/g, ctx.home)
    .replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => ctx.env[name] ?? '');
  if (text === '~' || text.startsWith('~/') || text.startsWith('~\\')) {
    text = path.join(ctx.home, text.slice(1));
  }
  if (!path.isAbsolute(text) && (text.includes('/') || text.includes('\\')) && folder) {
    text = path.join(folder, text);
  }
  return text;
}

function executableNames(base: string, platform: NodeJS.Platform): string[] {
  return platform === 'win32' ? [`${base}.exe`, `${base}.cmd`, `${base}.bat`] : [base];
}

/** The first `name` on PATH, or undefined. */
export function findOnPath(
  name: string,
  env: Record<string, string | undefined>,
  platform: NodeJS.Platform,
  exists: (file: string) => boolean,
): string | undefined {
  const delimiter = platform === 'win32' ? ';' : ':';
  const pathVar = env.PATH ?? env.Path ?? '';
  for (const dir of pathVar.split(delimiter)) {
    if (!dir) {
      continue;
    }
    for (const candidate of executableNames(name, platform)) {
      const file = path.join(dir, candidate);
      if (exists(file)) {
        return file;
      }
    }
  }
  return undefined;
}

/** mcphost in one of the workspace folders' virtual environments, or undefined. */
export function findInVenv(
  folders: string[],
  platform: NodeJS.Platform,
  exists: (file: string) => boolean,
): string | undefined {
  const bin = platform === 'win32' ? 'Scripts' : 'bin';
  for (const folder of folders) {
    for (const venv of VENV_DIRS) {
      for (const candidate of executableNames('mcphost', platform)) {
        const file = path.join(folder, venv, bin, candidate);
        if (exists(file)) {
          return file;
        }
      }
    }
  }
  return undefined;
}

export function resolveCommand(ctx: ResolveContext): Resolution {
  const { settings } = ctx;
  const configPath = expandPath(settings.configPath, ctx) || undefined;
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(settings.env ?? {})) {
    if (typeof value === 'string') {
      env[key] = value;
    }
  }
  const base = { configPath, env };

  const explicit = expandPath(settings.path, ctx);
  if (explicit) {
    const found = path.isAbsolute(explicit) ? explicit : findOnPath(explicit, ctx.env, ctx.platform, ctx.exists);
    if (!found || !ctx.exists(found)) {
      return { ok: false, error: `mcphost.path is set to "${settings.path}", but no executable is there.` };
    }
    return { ok: true, command: { command: found, prefix: [], source: 'mcphost.path', ...base } };
  }

  const interpreter = expandPath(settings.interpreter, ctx);
  if (interpreter) {
    const found = path.isAbsolute(interpreter)
      ? interpreter
      : findOnPath(interpreter, ctx.env, ctx.platform, ctx.exists);
    if (!found || !ctx.exists(found)) {
      return {
        ok: false,
        error: `mcphost.interpreter is set to "${settings.interpreter}", but no interpreter is there.`,
      };
    }
    return { ok: true, command: { command: found, prefix: ['-m', 'mcphost'], source: 'mcphost.interpreter', ...base } };
  }

  const venv = findInVenv(ctx.workspaceFolders, ctx.platform, ctx.exists);
  if (venv) {
    return { ok: true, command: { command: venv, prefix: [], source: 'workspace venv', ...base } };
  }

  const onPath = findOnPath('mcphost', ctx.env, ctx.platform, ctx.exists);
  if (onPath) {
    return { ok: true, command: { command: onPath, prefix: [], source: 'PATH', ...base } };
  }

  return {
    ok: false,
    error: `mcphost was not found: not in the workspace's virtual environment (.venv, venv, env) nor on PATH. ${INSTALL_HINT}`,
  };
}

/** Verbosity flags for the daemon from the log channel's level, numbered as vscode.LogLevel numbers them
 * (0 off, 1 trace, 2 debug, 3 info, 4 warning, 5 error). */
export function verbosityArgs(logLevel: number): string[] {
  if (logLevel === 1 || logLevel === 2) {
    return ['-vv'];
  }
  return logLevel === 3 ? ['-v'] : [];
}

/** Arguments of any mcphost command, `--config` included when the setting names one. */
export function commandArgs(command: McphostCommand, args: string[]): string[] {
  const config = command.configPath ? ['--config', command.configPath] : [];
  return [...command.prefix, ...args, ...config];
}

/** The daemon's arguments (vscode-languageclient appends `--stdio`). */
export function serveArgs(command: McphostCommand, logLevel: number): string[] {
  return commandArgs(command, ['serve', ...verbosityArgs(logLevel)]);
}

/** A shell command line for a terminal, with every word quoted for POSIX shells (or cmd on Windows). */
export function shellLine(words: string[], platform: NodeJS.Platform): string {
  if (platform === 'win32') {
    return words.map((w) => (/^[\w\-.:\\/=]+$/.test(w) ? w : `"${w.replace(/"/g, '""')}"`)).join(' ');
  }
  return words.map((w) => (/^[\w\-.:/=@%+,]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}
