import type { ActivityRecord, PermissionRequest } from '../src/protocol';

export function request(overrides: Partial<PermissionRequest> = {}): PermissionRequest {
  return {
    id: 'p-1',
    variant: 'call_tool_write',
    operation: 'write',
    action: 'ask',
    server: 'todo',
    tool: 'add_task',
    arguments: { title: 'buy milk' },
    arguments_preview: null,
    intent: { operation_type: 'write', data_sensitivity: 'private', reason: 'The user asked for it' },
    annotations: { readOnlyHint: false },
    call_with: 'call_tool_write',
    warnings: [],
    expires_at: '2030-01-01T00:05:00.000Z',
    remember_options: ['once', 'session', 'always'],
    session_id: 's-1',
    client: 'test-agent',
    match_options: [],
    ...overrides,
  };
}

export function destructive(overrides: Partial<PermissionRequest> = {}): PermissionRequest {
  return request({
    id: 'p-2',
    variant: 'call_tool_destructive',
    operation: 'destructive',
    action: 'confirm',
    tool: 'delete_task',
    arguments: { task_id: '1234' },
    intent: { operation_type: 'destructive', data_sensitivity: 'internal', reason: 'Clean up' },
    call_with: 'call_tool_destructive',
    remember_options: ['once', 'session'],
    ...overrides,
  });
}

export function record(overrides: Partial<ActivityRecord> = {}): ActivityRecord {
  return {
    id: '01J00000000000000000000001',
    timestamp: '2030-01-01T12:00:00.000Z',
    type: 'tool_call',
    server: 'todo',
    tool: 'add_task',
    status: 'success',
    duration_ms: 12.5,
    metadata: {
      intent: { operation_type: 'write', data_sensitivity: 'private', reason: 'The user asked' },
      tool_variant: 'call_tool_write',
    },
    decision: { by: 'editor', action: 'ask', outcome: 'allow', at: '2030-01-01T12:00:00.000Z', remember: 'once' },
    warnings: [],
    ...overrides,
  };
}
