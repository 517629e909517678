/**
 * Hands the daemon's agent endpoint to VS Code's agent mode: one streamable HTTP server definition, with the
 * bearer token from `mcphost/status`, so agent mode's tools go through mcphost without editing mcp.json.
 */

import * as vscode from 'vscode';

import type { Daemon } from './daemon';
import type { StatusPayload } from './protocol';
import { SERVER_LABEL } from './singlePrompt';

export const PROVIDER_ID = 'mcphost';
export { SERVER_LABEL };

/** The definition's identity: when it changes (a restarted daemon has a new port and token), VS Code is told. */
function endpointKey(status: StatusPayload | undefined): string {
  if (!status?.mcp?.url) {
    return '';
  }
  return JSON.stringify([status.mcp.url, status.mcp.headers ?? {}]);
}

export class McphostMcpProvider implements vscode.McpServerDefinitionProvider<vscode.McpHttpServerDefinition> {
  private readonly changeEmitter = new vscode.EventEmitter<void>();
  readonly onDidChangeMcpServerDefinitions = this.changeEmitter.event;
  private readonly resolveEmitter = new vscode.EventEmitter<void>();
  /** VS Code is starting the server (agent mode, the tools picker or "MCP: List Servers" wants its tools). */
  readonly onDidResolve = this.resolveEmitter.event;
  private key = '';
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly daemon: Daemon,
    private readonly enabled: () => boolean,
  ) {
    this.key = endpointKey(daemon.status);
    this.subscription = daemon.onDidChangeStatus((status) => {
      const key = endpointKey(status);
      // A daemon that went away keeps its definition until the next one is up: VS Code resolves it again then.
      if (key && key !== this.key) {
        this.key = key;
        this.changeEmitter.fire();
      }
    });
  }

  /** The settings changed: offer or withdraw the server. */
  refresh(): void {
    this.changeEmitter.fire();
  }

  private definition(status: StatusPayload | undefined): vscode.McpHttpServerDefinition | undefined {
    if (!status?.mcp?.url) {
      return undefined;
    }
    return new vscode.McpHttpServerDefinition(
      SERVER_LABEL,
      vscode.Uri.parse(status.mcp.url),
      { ...(status.mcp.headers ?? {}) },
      status.version,
    );
  }

  provideMcpServerDefinitions(): vscode.McpHttpServerDefinition[] {
    if (!this.enabled()) {
      return [];
    }
    // Nothing is offered until the daemon has said where it listens; its first status fires the change event.
    const definition = this.definition(this.daemon.status);
    return definition ? [definition] : [];
  }

  async resolveMcpServerDefinition(
    server: vscode.McpHttpServerDefinition,
    token: vscode.CancellationToken,
  ): Promise<vscode.McpHttpServerDefinition | undefined> {
    let status = this.daemon.status;
    if (!status?.mcp?.url) {
      if (this.daemon.state !== 'starting') {
        await this.daemon.start();
      }
      status = await this.waitForStatus(token, 30_000);
    }
    const current = this.definition(status);
    if (!current) {
      throw new Error('the mcphost daemon is not running: see the mcphost output, or run "mcphost: Restart Daemon"');
    }
    server.uri = current.uri;
    server.headers = current.headers;
    this.resolveEmitter.fire();
    return server;
  }

  private waitForStatus(token: vscode.CancellationToken, timeoutMs: number): Promise<StatusPayload | undefined> {
    if (this.daemon.status?.mcp?.url) {
      return Promise.resolve(this.daemon.status);
    }
    return new Promise((resolve) => {
      const finish = (value: StatusPayload | undefined) => {
        clearTimeout(timer);
        listener.dispose();
        cancel.dispose();
        resolve(value);
      };
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      const listener = this.daemon.onDidChangeStatus((status) => {
        if (status?.mcp?.url) {
          finish(status);
        }
      });
      const cancel = token.onCancellationRequested(() => finish(undefined));
    });
  }

  dispose(): void {
    this.subscription.dispose();
    this.changeEmitter.dispose();
    this.resolveEmitter.dispose();
  }
}
