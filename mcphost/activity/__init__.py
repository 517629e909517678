"""The activity log: the record model and the JSONL writer."""

from mcphost.activity.record import ActivityRecord, Decision, ErrorInfo, RecordType, Status, new_record_id
from mcphost.activity.writer import ActivityLog

__all__ = ["ActivityLog", "ActivityRecord", "Decision", "ErrorInfo", "RecordType", "Status", "new_record_id"]
