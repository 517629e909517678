/**
 * The daemon's status on screen: a LanguageStatusItem beside config files and a status bar entry. Both show the
 * same statusView (statusText.ts), so they never disagree; what they say is decided there.
 */

import * as vscode from 'vscode';

import type { StatusPayload } from './protocol';
import type { DaemonLink } from './sharedDaemon';
import { type ConnectionState, statusView } from './statusText';

const ITEM_ID = 'mcphost.status';
const CLICK_COMMANDS = { activity: 'mcphost.showActivity', prompts: 'mcphost.showPrompts' } as const;
const CLICK_TITLES = { activity: 'Show Activity', prompts: 'Show Waiting Prompt' } as const;
const BASE_SELECTOR: vscode.DocumentFilter[] = [{ language: 'toml' }, { pattern: '**/mcphost/config.toml' }];

export class StatusItems implements vscode.Disposable {
  private readonly languageStatus: vscode.LanguageStatusItem;
  private readonly statusBar: vscode.StatusBarItem;

  constructor() {
    this.languageStatus = vscode.languages.createLanguageStatusItem(ITEM_ID, BASE_SELECTOR);
    this.languageStatus.name = 'mcphost';
    this.languageStatus.command = { title: CLICK_TITLES.activity, command: CLICK_COMMANDS.activity };
    this.statusBar = vscode.window.createStatusBarItem(ITEM_ID, vscode.StatusBarAlignment.Left, 50);
    this.statusBar.name = 'mcphost';
    this.statusBar.command = CLICK_COMMANDS.activity;
    this.statusBar.show();
  }

  render(state: ConnectionState, status: StatusPayload | undefined, error: string | undefined, link: DaemonLink): void {
    const view = statusView(state, status, error, link);
    this.statusBar.text = view.text;
    this.statusBar.tooltip = view.tooltip;
    // VS Code allows only these two backgrounds on a status bar item.
    this.statusBar.backgroundColor = view.background
      ? new vscode.ThemeColor(`statusBarItem.${view.background}Background`)
      : undefined;
    this.statusBar.command = CLICK_COMMANDS[view.click];
    this.languageStatus.command = { title: CLICK_TITLES[view.click], command: CLICK_COMMANDS[view.click] };
    this.languageStatus.text = view.text;
    this.languageStatus.detail = view.detail;
    this.languageStatus.busy = view.busy;
    this.languageStatus.severity =
      view.severity === 'error'
        ? vscode.LanguageStatusSeverity.Error
        : view.severity === 'warning'
          ? vscode.LanguageStatusSeverity.Warning
          : vscode.LanguageStatusSeverity.Information;
  }

  /** The language status item shows beside the config in force, whatever its name or language mode. */
  showBesideConfig(configPath: string): void {
    this.languageStatus.selector = [...BASE_SELECTOR, { scheme: 'file', pattern: configPath }];
  }

  dispose(): void {
    this.languageStatus.dispose();
    this.statusBar.dispose();
  }
}
