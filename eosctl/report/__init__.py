"""An audit report: findings and their JSON form, root causes, the gap map's segments, the report file read
back and its compact JSON."""
